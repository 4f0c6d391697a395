/**
 * A malformed WebSocket handshake (wrong method, no `Upgrade: websocket`, a bad key or version,
 * a Sec-WebSocket-Protocol ws cannot parse) is refused before admission and `authenticate`, with
 * the status and text ws would answer, and like every other refusal it is counted
 * (rpc_rejected_upgrades_total{reason="bad-handshake"}) and logged ('upgrade rejected'). What
 * only ws can judge (an extension offer it cannot parse) is refused by ws after the hooks, and
 * counted and logged the same way.
 */
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import type { IncomingMessage } from 'node:http';
import { dirname, join } from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/index.js';
import { handshakeFault } from '../../src/server/upgrade-request.js';
import { startGateway } from '../support/gateway.js';
import { CaptureLogger } from '../support/logging.js';
import { sampleValue, scrape } from '../support/metrics.js';
import { Resources } from '../support/resources.js';
import { attemptUpgrade, rawHttpExchange } from '../support/sockets.js';
import type { RawHttpAnswer } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const resources = new Resources();
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await resources.cleanup();
});

const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';

/** An upgrade request's head for /rpc, with `extra` header lines. */
function upgradeHead(
  extra: string[] = [],
  {
    method = 'GET',
    key = KEY,
    version = '13',
    http = '1.1',
    host = true,
  }: { method?: string; key?: string; version?: string; http?: string; host?: boolean } = {},
): string {
  return [
    `${method} /rpc HTTP/${http}`,
    ...(host ? ['Host: 127.0.0.1'] : []),
    'Connection: Upgrade',
    'Upgrade: websocket',
    `Sec-WebSocket-Version: ${version}`,
    `Sec-WebSocket-Key: ${key}`,
    ...extra,
  ].join('\r\n');
}

/** Send `head` on a socket of its own; the answer up to the server's close (rawHttpExchange). */
function send(port: number, head: string): Promise<RawHttpAnswer> {
  return rawHttpExchange(port, head, (socket) => cleanups.push(() => socket.destroy()));
}

function slotsHeld<C>(gateway: Gateway<C>): number {
  return (gateway as unknown as { admission: { connections: number } }).admission.connections;
}

const CASES: [string, string, number, string][] = [
  [
    'duplicate subprotocols',
    upgradeHead(['Sec-WebSocket-Protocol: jsonrpc-2.0, jsonrpc-2.0']),
    400,
    'Invalid Sec-WebSocket-Protocol header',
  ],
  [
    'an empty subprotocol item',
    upgradeHead(['Sec-WebSocket-Protocol: a,,b']),
    400,
    'Invalid Sec-WebSocket-Protocol header',
  ],
  [
    'a subprotocol with a space inside',
    upgradeHead(['Sec-WebSocket-Protocol: a b']),
    400,
    'Invalid Sec-WebSocket-Protocol header',
  ],
  [
    'a key that is not 16 bytes in base64',
    upgradeHead([], { key: 'short' }),
    400,
    'Missing or invalid Sec-WebSocket-Key header',
  ],
  [
    'an unknown version',
    upgradeHead([], { version: '99' }),
    400,
    'Missing or invalid Sec-WebSocket-Version header',
  ],
  ['a POST', upgradeHead(['Content-Length: 0'], { method: 'POST' }), 405, 'Invalid HTTP method'],
  ['HTTP/1.0', upgradeHead([], { http: '1.0' }), 400, 'WebSocket needs HTTP/1.1 or later'],
  ['no Host header', upgradeHead([], { host: false }), 400, 'Missing Host header'],
  ['a body', upgradeHead(['Content-Length: 5']), 400, 'An upgrade request has no body'],
  [
    'a chunked body',
    upgradeHead(['Transfer-Encoding: chunked']),
    400,
    'An upgrade request has no body',
  ],
];

describe('malformed WebSocket handshakes', () => {
  it('are refused before admission and authenticate, with ws statuses, counted and logged', async () => {
    const logger = new CaptureLogger();
    let authenticated = 0;
    const { gateway, port, httpUrl, url } = await startGateway({
      logger,
      authenticate: () => {
        authenticated++;
        return {};
      },
    });
    cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
    const answers: RawHttpAnswer[] = [];
    for (const [, head] of CASES) answers.push(await send(port, head));
    expect(authenticated).toBe(0);
    expect(slotsHeld(gateway)).toBe(0);
    const metrics = await scrape(httpUrl);
    expect(sampleValue(metrics, 'rpc_rejected_upgrades_total', { reason: 'bad-handshake' })).toBe(
      CASES.length,
    );
    const logged = logger
      .withMessage('upgrade rejected')
      .filter((r) => (r.obj as { reason?: string }).reason === 'bad-handshake');
    expect(logged).toHaveLength(CASES.length);
    // The first of the interval at info, as every refusal a client can cause at will.
    expect(logged[0]!.level).toBe('info');
    expect(logged[0]!.obj).toMatchObject({ status: 400, remoteAddress: '127.0.0.1' });
    // ws's statuses and texts, with the header RFC 6455 asks for with a version refused.
    for (const [i, [name, , status, message]] of CASES.entries()) {
      const answer = answers[i]!;
      expect({ name, status: answer.status, body: answer.body }).toEqual({
        name,
        status,
        body: `${message}\n`,
      });
      if (status === 405) expect(answer.headers['allow']).toBe('GET');
      if (name === 'an unknown version') {
        expect(answer.headers['sec-websocket-version']).toBe('13, 8');
      }
    }
    // A well-formed handshake still opens, and is the only one authenticate saw.
    expect(await attemptUpgrade(resources, url)).toBe('open');
    expect(authenticated).toBe(1);
  });

  it('an extension offer ws cannot parse is refused by ws, counted and logged the same way', async () => {
    const logger = new CaptureLogger();
    const { gateway, port, httpUrl } = await startGateway({ logger, perMessageDeflate: true });
    cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
    const answer = await send(
      port,
      upgradeHead(['Sec-WebSocket-Extensions: permessage-deflate; ===']),
    );
    await waitUntil(() => slotsHeld(gateway) === 0, 'the admission slot released');
    const metrics = await scrape(httpUrl);
    expect(sampleValue(metrics, 'rpc_rejected_upgrades_total', { reason: 'bad-handshake' })).toBe(
      1,
    );
    expect(logger.withMessage('upgrade rejected')).toMatchObject([
      { level: 'info', obj: { reason: 'bad-handshake', status: 400 } },
    ]);
    expect(answer.status).toBe(400);
    expect(answer.body).toBe('Invalid or unacceptable Sec-WebSocket-Extensions header\n');
  });
});

/** ws's own Sec-WebSocket-Protocol parser (not exported: loaded from its file). */
const wsParseProtocols: (value: string) => Set<string> = (() => {
  const require = createRequire(import.meta.url);
  const wsDir = dirname(require.resolve('ws'));
  const subprotocol = require(join(wsDir, 'lib', 'subprotocol.js')) as {
    parse(this: void, value: string): Set<string>;
  };
  return subprotocol.parse;
})();

function request(method: string, headers: Record<string, string>): IncomingMessage {
  return {
    method,
    headers,
    httpVersionMajor: 1,
    httpVersionMinor: 1,
  } as unknown as IncomingMessage;
}

const WELL_FORMED = {
  host: '127.0.0.1',
  upgrade: 'websocket',
  'sec-websocket-key': KEY,
  'sec-websocket-version': '13',
};

describe('handshakeFault', () => {
  it('judges Sec-WebSocket-Protocol exactly as ws parses it', () => {
    const value = fc.string({
      unit: fc.constantFrom('a', 'b', 'c', '-', ' ', '\t', ',', '"', '/', 'é'),
      maxLength: 12,
    });
    fc.assert(
      fc.property(value, (protocols) => {
        let wsTakes = true;
        try {
          wsParseProtocols(protocols);
        } catch {
          wsTakes = false;
        }
        const fault = handshakeFault(
          request('GET', { ...WELL_FORMED, 'sec-websocket-protocol': protocols }),
        );
        expect(fault === undefined).toBe(wsTakes);
        if (fault) expect(fault.status).toBe(400);
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses an Upgrade token other than websocket (h2c), and takes version 8 as ws does', () => {
    expect(handshakeFault(request('GET', { ...WELL_FORMED, upgrade: 'h2c' }))).toEqual({
      status: 400,
      message: 'Invalid Upgrade header',
    });
    expect(handshakeFault(request('GET', { ...WELL_FORMED, upgrade: 'WebSocket' }))).toBe(
      undefined,
    );
    expect(handshakeFault(request('GET', { ...WELL_FORMED, 'sec-websocket-version': '8' }))).toBe(
      undefined,
    );
    const { upgrade: _dropped, ...noUpgrade } = WELL_FORMED;
    expect(handshakeFault(request('GET', noUpgrade))?.status).toBe(400);
  });
});

describe('a request target in absolute form', () => {
  /** Send `head` and read the answer's status line, then close the socket. */
  function statusOf(port: number, head: string): Promise<string> {
    const socket = connect({ port, host: '127.0.0.1' });
    cleanups.push(() => socket.destroy());
    return new Promise((resolve, reject) => {
      let received = '';
      socket.setEncoding('utf8');
      socket.on('error', reject);
      socket.on('data', (chunk: string) => {
        received += chunk;
        const end = received.indexOf('\r\n');
        if (end !== -1) resolve(received.slice(0, end));
      });
      socket.write(`${head}\r\n\r\n`);
    });
  }

  it('is upgraded as its origin form is (RFC 9112 3.2.2), and other paths stay 404', async () => {
    const { gateway, port } = await startGateway();
    cleanups.push(() => gateway.close({ timeoutMs: 1_000 }));
    const absolute = upgradeHead().replace('GET /rpc ', `GET http://127.0.0.1:${port}/rpc?x=1 `);
    expect(await statusOf(port, absolute)).toBe('HTTP/1.1 101 Switching Protocols');
    const elsewhere = upgradeHead().replace('GET /rpc ', `GET http://127.0.0.1:${port}/other `);
    expect(await statusOf(port, elsewhere)).toMatch(/^HTTP\/1\.1 404/);
  });
});
