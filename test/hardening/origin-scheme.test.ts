/**
 * Without `allowedOrigins`, a request known to have come over TLS (a TLS socket, or a trusted
 * proxy's `X-Forwarded-Proto: https`) is let in, and granted CORS, only from an https page of its
 * host: a plain http page, which anyone on the network can write into, would otherwise open a
 * session with the user's cookies, `Secure` ones included. A request not known to be TLS keeps
 * admitting either scheme (a TLS-terminating proxy the gateway was not told of looks the same).
 */
import { request as httpsRequest } from 'node:https';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { attemptUpgrade } from '../support/sockets.js';
import { makeSelfSignedCertificate } from '../support/tls.js';
import type { TestCertificate } from '../support/tls.js';

const res = new Resources();
afterEach(() => res.cleanup());

let certificate: TestCertificate;
beforeAll(() => {
  certificate = makeSelfSignedCertificate();
});
afterAll(() => certificate?.remove());

/** The status of a CORS preflight of POST /rpc over https, and the origin it was granted. */
function preflight(port: number, origin: string): Promise<{ status: number; granted: unknown }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        path: '/rpc',
        method: 'OPTIONS',
        ca: certificate.cert,
        servername: 'localhost',
        headers: {
          host: `localhost:${port}`,
          origin,
          'access-control-request-method': 'POST',
        },
      },
      (response) => {
        response.resume();
        response.once('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            granted: response.headers['access-control-allow-origin'],
          }),
        );
      },
    );
    req.once('error', reject);
    req.end();
  });
}

describe('the page’s scheme, without allowedOrigins', () => {
  it('over TLS: an https page of the host is let in and granted CORS, an http one gets 403', async () => {
    const { gateway, port } = await res.gateway({
      tls: { cert: certificate.cert, key: certificate.key },
    });
    const url = `wss://localhost:${port}/rpc`;
    const upgrade = (origin: string) => attemptUpgrade(res, url, { ca: certificate.cert, origin });
    expect(await upgrade('http://localhost:5173')).toBe(403);
    expect(await upgrade(`http://localhost:${port}`)).toBe(403);
    expect(gateway.sessions.size).toBe(0);
    expect(await upgrade('https://localhost:5173')).toBe('open');
    expect(await upgrade(`https://LOCALHOST:${port}`)).toBe('open');
    expect(await preflight(port, 'http://localhost:5173')).toEqual({
      status: 403,
      granted: undefined,
    });
    expect(await preflight(port, 'https://localhost:5173')).toEqual({
      status: 204,
      granted: 'https://localhost:5173',
    });
  });

  it('through a trusted proxy: its X-Forwarded-Proto decides; from any other peer it is not believed', async () => {
    const behindProxy = await res.gateway({ trustedProxies: ['127.0.0.1'] });
    const direct = await res.gateway();
    const upgrade = (url: string, origin: string, proto?: string) =>
      attemptUpgrade(res, url, {
        origin,
        ...(proto !== undefined && { headers: { 'x-forwarded-proto': proto } }),
      });
    const page = 'http://127.0.0.1:5173';
    expect(await upgrade(behindProxy.url, page, 'https')).toBe(403);
    expect(await upgrade(behindProxy.url, page, 'HTTPS, http')).toBe(403);
    // Traefik writes the upgrade's own scheme.
    expect(await upgrade(behindProxy.url, page, 'wss')).toBe(403);
    expect(await upgrade(behindProxy.url, 'https://127.0.0.1:5173', 'https')).toBe('open');
    expect(await upgrade(behindProxy.url, page, 'http')).toBe('open');
    expect(await upgrade(behindProxy.url, page)).toBe('open');
    // Anyone can write the header: a peer that is no trusted proxy is judged by its socket.
    expect(await upgrade(direct.url, page, 'https')).toBe('open');
  });
});
