import type { ChildProcess } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { RequestOptions } from 'node:https';
import { connect as connectTcp } from 'node:net';
import { connect as connectTls } from 'node:tls';
import { pino } from 'pino';
import { firstValueFrom } from 'rxjs';
import { WebSocket } from 'ws';
import type { ClientOptions as WsClientOptions } from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  NotConnectedError,
  createClient,
  createGateway,
  tcpSocket,
  tlsFromEnv,
} from '../../src/index.js';
import type { Gateway, RpcClient, TransportKind } from '../../src/index.js';
import { ensureBuilt, exitOf, mainJs, spawnServer } from '../support/demo-process.js';
import { freePort } from '../support/network.js';
import { makeSelfSignedCertificate } from '../support/tls.js';
import type { TestCertificate } from '../support/tls.js';

const SUBTRACT_REQUEST = '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}';
const SUBTRACT_REPLY = '{"jsonrpc":"2.0","result":19,"id":1}';

let certificate: TestCertificate;

beforeAll(async () => {
  certificate = makeSelfSignedCertificate();
  await ensureBuilt();
}, 180_000);
afterAll(() => certificate?.remove());

/** Everything a test opens; closed in afterEach: clients, sockets, gateways, then children. */
const opened = {
  clients: [] as RpcClient[],
  sockets: [] as { destroy(): void }[],
  wsSockets: [] as WebSocket[],
  gateways: [] as Gateway[],
  children: [] as ChildProcess[],
};

afterEach(async () => {
  await Promise.all(opened.clients.splice(0).map((client) => client.close()));
  for (const socket of opened.sockets.splice(0)) socket.destroy();
  await Promise.all(
    opened.wsSockets.splice(0).map(
      (socket) =>
        new Promise<void>((resolve) => {
          if (socket.readyState === WebSocket.CLOSED) return resolve();
          socket.on('error', () => undefined);
          socket.once('close', () => resolve());
          socket.terminate();
        }),
    ),
  );
  await Promise.all(
    opened.gateways.splice(0).map((gateway) => gateway.close({ timeoutMs: 1_000 })),
  );
  await Promise.all(
    opened.children.splice(0).map((child) => {
      const exited = exitOf(child);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      return exited;
    }),
  );
});

/**
 * Poll `condition` until it holds (running `probe` before each look, if given); fail with
 * `what` after `timeoutMs`. Leaves no timer behind.
 */
async function waitFor(
  condition: () => boolean,
  what: string,
  timeoutMs = 15_000,
  probe?: () => Promise<void>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await probe?.();
    if (condition()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, probe ? 50 : 10));
  }
}

/** `ws`'s WebSocket that trusts `ca`, for `createClient({ WebSocket })`. */
function trustingWebSocket(
  ca: string,
): new (url: string, protocols?: string | string[]) => WebSocket {
  return class TrustingWebSocket extends WebSocket {
    constructor(url: string, protocols?: string | string[]) {
      const options: WsClientOptions = { ca };
      super(url, protocols, options);
    }
  };
}

interface HttpOutcome {
  status: number;
  contentType: string | undefined;
  body: string;
}

/** One HTTP(S) exchange; rejects on a connection or TLS error. No keep-alive agent. */
function exchange(secure: boolean, options: RequestOptions, body?: string): Promise<HttpOutcome> {
  return new Promise((resolve, reject) => {
    const request = (secure ? httpsRequest : httpRequest)({ agent: false, ...options }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          contentType: res.headers['content-type'],
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
    });
    request.on('error', reject);
    request.end(body);
  });
}

function postRpc(secure: boolean, port: number, body: string, ca?: string): Promise<HttpOutcome> {
  return exchange(
    secure,
    {
      host: 'localhost',
      port,
      path: '/rpc',
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      ...(ca === undefined ? {} : { ca }),
    },
    body,
  );
}

/** The error a promise rejects with; fails if it fulfils. */
async function rejectionOf(promise: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    const value = await promise;
    throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
  } catch (err) {
    return err as Error & { code?: string };
  }
}

/** A TLS gateway (cert and key from the test certificate) with subtract and a topic. */
function tlsGateway(transports: TransportKind[] = []): Gateway {
  const gateway = createGateway<unknown>({
    tls: { cert: certificate.cert, key: certificate.key },
    logger: pino({ level: 'silent' }),
    heartbeatIntervalMs: 0,
    authenticate: ({ transport }) => {
      transports.push(transport);
      return {};
    },
  });
  gateway.method('subtract', ([a, b]: [number, number]) => a - b);
  gateway.topic('news');
  opened.gateways.push(gateway);
  return gateway;
}

function client(options: Parameters<typeof createClient>[0]): RpcClient {
  const created = createClient({ reconnect: false, heartbeat: false, ...options });
  opened.clients.push(created);
  return created;
}

/** An NDJSON exchange on a raw socket: write `text`, end our side, collect everything until the end. */
function ndjsonExchange(
  socket: { write(text: string): boolean; end(): void } & NodeJS.EventEmitter,
  text: string,
): Promise<string> {
  return new Promise((resolve, reject) => {
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('utf8')));
    socket.on('end', () => resolve(received));
    socket.on('error', reject);
    socket.write(text);
    socket.end();
  });
}

describe('a gateway with the tls option: https:// and wss://', () => {
  it('a wss:// client that trusts the certificate calls subtract and gets topic messages', async () => {
    const transports: TransportKind[] = [];
    const gateway = tlsGateway(transports);
    const { port } = await gateway.listen(0);
    const rpc = client({
      url: `wss://localhost:${port}/rpc`,
      WebSocket: trustingWebSocket(certificate.cert),
    });

    expect(await rpc.call('subtract', [42, 23])).toBe(19);
    const news = firstValueFrom(rpc.subscribeWithMeta<{ headline: string }>('news'));
    await waitFor(() => (gateway.pubsub.topics()['news'] ?? 0) >= 1, 'the subscription');
    const seq = await gateway.publish('news', { headline: 'over TLS' });
    expect(await news).toMatchObject({ data: { headline: 'over TLS' }, seq });
    expect(transports).toEqual(['websocket']);
  });

  it('an https:// POST to /rpc that trusts the certificate gets the JSON-RPC response', async () => {
    const transports: TransportKind[] = [];
    const gateway = tlsGateway(transports);
    const { port } = await gateway.listen(0);

    const reply = await postRpc(true, port, SUBTRACT_REQUEST, certificate.cert);
    expect(reply.status).toBe(200);
    expect(reply.contentType).toMatch(/^application\/json/);
    expect(reply.body).toBe(SUBTRACT_REPLY);
    expect(transports).toEqual(['http']);

    const livez = await exchange(true, {
      host: 'localhost',
      port,
      path: '/livez',
      ca: certificate.cert,
    });
    expect(livez.status).toBe(200);
  });

  it('without the CA, wss:// and https:// fail certificate verification', async () => {
    const transports: TransportKind[] = [];
    const gateway = tlsGateway(transports);
    const { port } = await gateway.listen(0);

    const socket = new WebSocket(`wss://localhost:${port}/rpc`);
    opened.wsSockets.push(socket);
    const wsError = await new Promise<Error & { code?: string }>((resolve, reject) => {
      socket.once('error', resolve);
      socket.once('open', () => reject(new Error('the wss connection opened without the CA')));
    });
    expect(wsError.code).toMatch(/SELF_SIGNED|UNABLE_TO_VERIFY|UNTRUSTED/);

    const httpsError = await rejectionOf(postRpc(true, port, SUBTRACT_REQUEST));
    expect(httpsError.code).toMatch(/SELF_SIGNED|UNABLE_TO_VERIFY|UNTRUSTED/);

    // The client never opens; without reconnect it ends closed.
    const untrusting = client({ url: `wss://localhost:${port}/rpc`, WebSocket });
    expect(await rejectionOf(untrusting.opened())).toBeInstanceOf(NotConnectedError);
    expect(untrusting.state).toBe('closed');

    // None of them got as far as authenticate.
    expect(transports).toEqual([]);
  });

  it('plain ws:// and http:// on the TLS port get no JSON-RPC answer', async () => {
    const transports: TransportKind[] = [];
    const gateway = tlsGateway(transports);
    const { port } = await gateway.listen(0);

    const plainWs = new WebSocket(`ws://127.0.0.1:${port}/rpc`);
    opened.wsSockets.push(plainWs);
    const frames: string[] = [];
    plainWs.on('message', (data) => frames.push((data as Buffer).toString('utf8')));
    const wsOutcome = await new Promise<string>((resolve) => {
      plainWs.once('open', () => {
        plainWs.send(SUBTRACT_REQUEST);
        resolve('open');
      });
      plainWs.once('error', () => resolve('error'));
      plainWs.once('unexpected-response', () => resolve('unexpected-response'));
    });
    expect(wsOutcome).not.toBe('open');

    let httpAnswer: string;
    try {
      const outcome = await postRpc(false, port, SUBTRACT_REQUEST);
      httpAnswer = `${outcome.status} ${outcome.body}`;
    } catch (err) {
      httpAnswer = `error ${(err as { code?: string }).code ?? String(err)}`;
    }
    expect(httpAnswer).not.toContain('"result"');
    expect(httpAnswer).not.toContain('jsonrpc');
    expect(frames).toEqual([]);
    expect(transports).toEqual([]);
  });
});

describe('listenTcp on a TLS gateway: NDJSON over TLS', () => {
  it('createClient with tcpSocket({ ca }) on tls:// calls subtract', async () => {
    const transports: TransportKind[] = [];
    const gateway = tlsGateway(transports);
    const { port } = await gateway.listenTcp(0);
    const rpc = client({
      url: `tls://localhost:${port}`,
      WebSocket: tcpSocket({ ca: certificate.cert }),
    });

    expect(await rpc.call('subtract', [42, 23])).toBe(19);
    const news = firstValueFrom(rpc.subscribe<string>('news'));
    await waitFor(() => (gateway.pubsub.topics()['news'] ?? 0) >= 1, 'the subscription');
    await gateway.publish('news', 'tls line');
    expect(await news).toBe('tls line');
    expect(transports).toEqual(['tcp']);
  });

  it('a raw TLS socket that writes one line and ends its side gets the reply, then the end', async () => {
    const gateway = tlsGateway();
    const { port } = await gateway.listenTcp(0);
    const socket = connectTls({
      host: 'localhost',
      servername: 'localhost',
      port,
      ca: certificate.cert,
    });
    opened.sockets.push(socket);
    await new Promise<void>((resolve, reject) => {
      socket.once('secureConnect', () => resolve());
      socket.once('error', reject);
    });
    expect(await ndjsonExchange(socket, `${SUBTRACT_REQUEST}\n`)).toBe(`${SUBTRACT_REPLY}\n`);
  });

  it('tcpSocket without the CA never opens; plain TCP to the TLS port gets no JSON-RPC answer', async () => {
    const transports: TransportKind[] = [];
    const gateway = tlsGateway(transports);
    const { port } = await gateway.listenTcp(0);

    const untrusting = client({ url: `tls://localhost:${port}`, WebSocket: tcpSocket() });
    expect(await rejectionOf(untrusting.opened())).toBeInstanceOf(NotConnectedError);

    const plain = connectTcp({ host: '127.0.0.1', port });
    opened.sockets.push(plain);
    await new Promise<void>((resolve, reject) => {
      plain.once('connect', () => resolve());
      plain.once('error', reject);
    });
    let answer: string;
    try {
      answer = await ndjsonExchange(plain, `${SUBTRACT_REQUEST}\n`);
    } catch (err) {
      answer = `error ${(err as { code?: string }).code ?? String(err)}`;
    }
    expect(answer).not.toContain('jsonrpc');
    expect(transports).toEqual([]);
  });
});

describe('tlsFromEnv', () => {
  it('reads TLS_CERT_FILE and TLS_KEY_FILE', () => {
    const tls = tlsFromEnv({
      TLS_CERT_FILE: certificate.certFile,
      TLS_KEY_FILE: certificate.keyFile,
    });
    expect(tls).toEqual({ cert: certificate.cert, key: certificate.key });
  });

  it('takes TLS_CERT and TLS_KEY as PEM text, and TLS_KEY_PASSPHRASE', () => {
    expect(tlsFromEnv({ TLS_CERT: certificate.cert, TLS_KEY: certificate.key })).toEqual({
      cert: certificate.cert,
      key: certificate.key,
    });
    expect(
      tlsFromEnv({
        TLS_CERT: certificate.cert,
        TLS_KEY: certificate.key,
        TLS_KEY_PASSPHRASE: 'sesame',
      }),
    ).toEqual({ cert: certificate.cert, key: certificate.key, passphrase: 'sesame' });
  });

  it('treats empty TLS_CERT / TLS_KEY as unset, so the _FILE variables still count', () => {
    expect(
      tlsFromEnv({
        TLS_CERT: '',
        TLS_KEY: '',
        TLS_CERT_FILE: certificate.certFile,
        TLS_KEY_FILE: certificate.keyFile,
      }),
    ).toEqual({ cert: certificate.cert, key: certificate.key });
  });

  it('is undefined when nothing is set', () => {
    expect(tlsFromEnv({})).toBeUndefined();
    expect(tlsFromEnv({ PORT: '8080' })).toBeUndefined();
  });

  it('throws naming the missing half when only one is set', () => {
    expect(() => tlsFromEnv({ TLS_CERT_FILE: certificate.certFile })).toThrow(/TLS_KEY_FILE/);
    expect(() => tlsFromEnv({ TLS_KEY_FILE: certificate.keyFile })).toThrow(/TLS_CERT_FILE/);
    expect(() => tlsFromEnv({ TLS_CERT: certificate.cert })).toThrow(Error);
  });

  it('the result serves a working TLS gateway', async () => {
    const tls = tlsFromEnv({
      TLS_CERT_FILE: certificate.certFile,
      TLS_KEY_FILE: certificate.keyFile,
    });
    const gateway = createGateway({
      tls,
      logger: pino({ level: 'silent' }),
      heartbeatIntervalMs: 0,
    });
    opened.gateways.push(gateway);
    gateway.method('subtract', ([a, b]: [number, number]) => a - b);
    const { port } = await gateway.listen(0);
    const reply = await postRpc(true, port, SUBTRACT_REQUEST, certificate.cert);
    expect(reply).toMatchObject({ status: 200, body: SUBTRACT_REPLY });
  });
});

describe('the demo process with TLS_CERT_FILE and TLS_KEY_FILE', () => {
  it('serves https:// and wss://, then drains and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const { child, output, exited } = spawnServer(mainJs, port, {
      TLS_CERT_FILE: certificate.certFile,
      TLS_KEY_FILE: certificate.keyFile,
    });
    opened.children.push(child);
    const get = (path: string): Promise<HttpOutcome> =>
      exchange(true, { host: 'localhost', port, path, ca: certificate.cert });

    // Poll /livez over https until the process answers (fail at once if it exits).
    let livez = 0;
    await waitFor(
      () => {
        if (child.exitCode !== null) throw new Error(`the demo exited early: ${output()}`);
        return livez === 200;
      },
      'the demo to answer /livez over https',
      30_000,
      async () => {
        livez = await get('/livez').then(
          (outcome) => outcome.status,
          () => 0,
        );
      },
    );

    const page = await get('/');
    expect(page.status).toBe(200);
    expect(page.contentType).toMatch(/^text\/html/);
    expect(page.body).toMatch(/<html/i);

    // Plain http:// on the same port gets no page.
    const plain = await exchange(false, { host: '127.0.0.1', port, path: '/' }).then(
      (outcome) => `${outcome.status}`,
      (err: { code?: string }) => `error ${err.code}`,
    );
    expect(plain).not.toBe('200');

    const rpc = client({
      url: `wss://localhost:${port}/rpc`,
      WebSocket: trustingWebSocket(certificate.cert),
    });
    expect(await rpc.call('subtract', [42, 23])).toBe(19);
    expect(await rpc.call('subtract', { minuend: 42, subtrahend: 23 })).toBe(19);
    const reply = await postRpc(true, port, SUBTRACT_REQUEST, certificate.cert);
    expect(reply).toMatchObject({ status: 200, body: SUBTRACT_REPLY });

    expect(child.kill('SIGTERM')).toBe(true);
    const { code, signal } = await exited;
    expect({ code, signal, output: code === 0 ? '' : output() }).toEqual({
      code: 0,
      signal: null,
      output: '',
    });
    // The drain told the client to go elsewhere; without reconnect it ends closed.
    await waitFor(() => rpc.state === 'closed', 'the client to close');
  });
});
