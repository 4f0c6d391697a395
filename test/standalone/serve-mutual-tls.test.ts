// `tls.caFile` is mutual TLS: serve asks every client for a certificate and refuses, in the
// handshake, one that presents none or one another CA signed; a client whose certificate the
// file's CA signed is served, over https, wss and TLS on tcpPort. Certificates made with openssl.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { serve } from '../../src/standalone/serve.js';
import type { StandaloneServer } from '../../src/standalone/serve.js';
import { resolveStandaloneConfig } from '../../src/standalone/standalone-config.js';
import { makeSelfSignedCertificate } from '../support/tls.js';
import type { TestCertificate } from '../support/tls.js';

const dir = mkdtempSync(join(tmpdir(), 'serve-mutual-tls-'));
let server: TestCertificate;
afterAll(() => {
  server?.remove();
  rmSync(dir, { recursive: true, force: true });
});

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { stdio: 'ignore', cwd: dir });
}

const ecKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A CA's certificate and key files, named `name`.pem and `name`.key. */
function makeCa(name: string): void {
  openssl(
    'req',
    '-x509',
    ...ecKey,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.pem`,
    '-days',
    '1',
    '-subj',
    `/CN=${name}`,
  );
}

/** A client certificate `name` signed by `ca`: its PEM certificate and key. */
function makeClient(name: string, ca: string): { cert: string; key: string } {
  writeFileSync(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  openssl('req', ...ecKey, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
  openssl(
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-out',
    `${name}.pem`,
    '-days',
    '1',
    '-extfile',
    'client.ext',
  );
  return {
    cert: readFileSync(join(dir, `${name}.pem`), 'utf8'),
    key: readFileSync(join(dir, `${name}.key`), 'utf8'),
  };
}

type ClientCertificate = { cert: string; key: string } | Record<string, never>;
let trusted: ClientCertificate;
let untrusted: ClientCertificate;
const none: ClientCertificate = {};

beforeAll(() => {
  server = makeSelfSignedCertificate();
  makeCa('trusted-ca');
  makeCa('other-ca');
  trusted = makeClient('trusted-client', 'trusted-ca');
  untrusted = makeClient('other-client', 'other-ca');
});

let running: StandaloneServer | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

async function start(caFile: string | undefined): Promise<StandaloneServer> {
  const config = resolveStandaloneConfig({
    listen: { host: '127.0.0.1', port: 0, tcpPort: 0 },
    tls: { certFile: server.certFile, keyFile: server.keyFile, ...(caFile && { caFile }) },
    shutdown: { drainDeadlineMs: 0 },
  });
  running = await serve(config, { logger: pino({ level: 'silent' }), baseDir: dir });
  return running;
}

/** GET /livez over https: its status, or the error that ended the request. */
function livez(port: number, client: ClientCertificate): Promise<number | Error> {
  return new Promise((resolve) => {
    const req = request(
      { host: '127.0.0.1', port, path: '/livez', ca: server.cert, agent: false, ...client },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      },
    );
    req.on('error', resolve);
    req.end();
  });
}

/** A WebSocket over wss: 'open', or the error it failed with. */
function websocket(url: string, client: ClientCertificate): Promise<'open' | Error> {
  return new Promise((resolve) => {
    const socket = new WebSocket(url, { ca: server.cert, ...client });
    socket.once('open', () => {
      socket.close();
      resolve('open');
    });
    socket.once('error', resolve);
  });
}

/** One JSON-RPC call over TLS on tcpPort: the reply's line, or the error the socket ended with. */
function tcpCall(port: number, client: ClientCertificate): Promise<string | Error> {
  return new Promise((resolve) => {
    const socket = connect({
      host: '127.0.0.1',
      port,
      ca: server.cert,
      servername: 'localhost',
      ...client,
    });
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (text: string) => {
      received += text;
      if (received.includes('\n')) {
        socket.destroy();
        resolve(received.split('\n')[0]!);
      }
    });
    socket.once('error', resolve);
    socket.once('close', () => resolve(new Error(`closed after ${JSON.stringify(received)}`)));
    socket.write('{"jsonrpc":"2.0","id":1,"method":"rpc.ping"}\n');
  });
}

describe('tls.caFile: mutual TLS', () => {
  it('a client with a certificate its CA signed is served over https, wss and TLS on tcpPort', async () => {
    const { address, url, tcpAddress } = await start(join(dir, 'trusted-ca.pem'));
    expect(await livez(address.port, trusted)).toBe(200);
    expect(await websocket(url, trusted)).toBe('open');
    expect(await tcpCall(tcpAddress!.port, trusted)).toMatch(/"id":1/);
  });

  it.each([
    ['no certificate', () => none],
    ['a certificate another CA signed', () => untrusted],
  ])('a client with %s is refused in the handshake, on every listener', async (_name, client) => {
    const { address, url, tcpAddress } = await start(join(dir, 'trusted-ca.pem'));
    expect(await livez(address.port, client())).toBeInstanceOf(Error);
    expect(await websocket(url, client())).toBeInstanceOf(Error);
    expect(await tcpCall(tcpAddress!.port, client())).toBeInstanceOf(Error);
  });

  it('without caFile, no client certificate is asked for', async () => {
    const { address } = await start(undefined);
    expect(await livez(address.port, none)).toBe(200);
  });
});
