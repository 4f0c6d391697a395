// The client's side of the identity wire (docs/identity.md), against a small raw `ws` server
// that speaks it: rpc.authenticate first, rpc.token answered from getToken, refusals (-32010,
// 4401/4403/4419) stopping the retries and rejecting calls with AuthenticationError, and the
// per-dial functions (url, headers, the header token).
import type { IncomingHttpHeaders } from 'node:http';
import type { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { AuthenticationError } from '../../src/client/index.js';
import type { ClientOptions, DisconnectEvent, RpcClient } from '../../src/client/index.js';
import type { ClientFrame as Frame } from '../support/fake-gateway.js';
import { FakeGateways, frameOf, send } from '../support/fake-gateway.js';
import { CaptureLogger } from '../support/logging.js';
import { sleep } from '../support/promises.js';
import { waitUntil } from '../support/waiting.js';

/** One connection to the fake server: the frames it got, and how to answer or call. */
interface Conn {
  socket: WebSocket;
  headers: IncomingHttpHeaders;
  url: string;
  frames: Frame[];
  send(frame: object): void;
}

/** `answer` says what the server replies to each request; undefined: nothing (yet). */
type Answer = (frame: Frame, conn: Conn) => object | undefined;

const ok: Answer = (frame) =>
  frame.method === 'rpc.authenticate'
    ? { result: { sessionId: 's1', user: 'alice' } }
    : frame.method === 'subscribe'
      ? { result: 'sub-1' }
      : { result: frame.method };

const gateways = new FakeGateways({ reconnect: { initialDelayMs: 10, maxDelayMs: 50 } });
afterEach(() => gateways.cleanup());

async function fakeServer(answer: Answer = ok) {
  const conns: Conn[] = [];
  const { url } = await gateways.listen((socket, _n, request) => {
    const conn: Conn = {
      socket,
      headers: request.headers,
      url: request.url ?? '',
      frames: [],
      send: (frame) => send(socket, frame),
    };
    conns.push(conn);
    socket.on('message', (data) => {
      const frame = frameOf(data);
      conn.frames.push(frame);
      if (frame.method === undefined || frame.id === undefined) return;
      const reply = answer(frame, conn);
      if (reply) conn.send({ id: frame.id, ...reply });
    });
  });
  return { url, conns };
}

const client = (options: ClientOptions): RpcClient => gateways.client(options);

function collect(c: RpcClient): DisconnectEvent[] {
  const events: DisconnectEvent[] = [];
  c.disconnects$.subscribe((event) => events.push(event));
  return events;
}

const refused = (reason: string) => ({
  error: { code: -32010, message: 'Unauthenticated', data: { reason } },
});

describe('in-band authentication', () => {
  it('sends rpc.authenticate first, before resubscribes and queued calls, and opens once answered', async () => {
    let answerAuth: (() => void) | undefined;
    const { url, conns } = await fakeServer((frame, conn) => {
      if (frame.method !== 'rpc.authenticate') return ok(frame, conn);
      answerAuth = () => conn.send({ id: frame.id!, result: { sessionId: 's1' } });
      return undefined;
    });
    const c = client({ url, getToken: () => 'tok-1' });
    const news: unknown[] = [];
    c.subscribe('news').subscribe((m) => news.push(m));
    const echoed = c.call('echo');
    await waitUntil(() => answerAuth !== undefined, 'rpc.authenticate');
    await sleep(30);
    // Nothing but the token until it is answered, and the client is not open yet.
    expect(conns[0]!.frames.map((f) => f.method)).toEqual(['rpc.authenticate']);
    expect(conns[0]!.frames[0]!.params).toEqual({ token: 'tok-1' });
    expect(c.state).toBe('connecting');
    answerAuth!();
    expect(await echoed).toBe('echo');
    expect(conns[0]!.frames.map((f) => f.method)).toEqual([
      'rpc.authenticate',
      'subscribe',
      'echo',
    ]);
    expect(c.state).toBe('open');
  });

  it('a refusal (-32010) is an AuthenticationError: calls reject, no more dials, one warn line', async () => {
    const { url, conns } = await fakeServer((frame, conn) =>
      frame.method === 'rpc.authenticate' ? refused('invalid') : ok(frame, conn),
    );
    const logger = new CaptureLogger();
    const c = client({ url, getToken: () => 'bad', logger });
    const events = collect(c);
    const queued = c.call('echo').catch((err: unknown) => err);
    const opened = await c.opened().catch((err: unknown) => err);
    expect(opened).toBeInstanceOf(AuthenticationError);
    expect(opened).toMatchObject({ code: -32010, reason: 'invalid' });
    expect(await queued).toBe(opened);
    expect(c.state).toBe('closed');
    expect(events).toEqual([
      expect.objectContaining({ code: 4401, error: opened, willRetry: false }),
    ]);
    expect(c.lastDisconnect).toBe(events[0]);
    await expect(c.call('later')).rejects.toBe(opened);
    await sleep(100);
    expect(conns).toHaveLength(1);
    expect(logger.records.filter((r) => r.level === 'warn')).toHaveLength(1);
  });

  it("with reconnect.onAuthFailure 'retry' a refusal dials again", async () => {
    let tries = 0;
    const { url, conns } = await fakeServer((frame, conn) =>
      frame.method === 'rpc.authenticate' && ++tries < 3 ? refused('expired') : ok(frame, conn),
    );
    const c = client({
      url,
      getToken: () => `tok-${tries}`,
      reconnect: { initialDelayMs: 5, maxDelayMs: 10, onAuthFailure: 'retry' },
    });
    const events = collect(c);
    await c.opened();
    expect(conns).toHaveLength(3);
    expect(events.map((e) => [e.willRetry, (e.error as AuthenticationError).reason])).toEqual([
      [true, 'expired'],
      [true, 'expired'],
    ]);
  });
});

describe('refresh', () => {
  it("answers the server's rpc.token from getToken; without a provider, -32601", async () => {
    const { url, conns } = await fakeServer();
    let n = 0;
    const c = client({ url, getToken: () => Promise.resolve(`tok-${++n}`) });
    await c.opened();
    conns[0]!.send({ id: 'r1', method: 'rpc.token', params: { expiresAt: Date.now() + 1000 } });
    await waitUntil(() => conns[0]!.frames.some((f) => f.id === 'r1'), 'the rpc.token answer');
    expect(conns[0]!.frames.find((f) => f.id === 'r1')?.result).toEqual({ token: 'tok-2' });

    const plain = client({ url });
    await plain.opened();
    conns[1]!.send({ id: 'r2', method: 'rpc.token', params: { expiresAt: 0 } });
    await waitUntil(() => conns[1]!.frames.some((f) => f.id === 'r2'), 'the rpc.token answer');
    expect(conns[1]!.frames.find((f) => f.id === 'r2')?.error?.code).toBe(-32601);
  });

  it('client.authenticate presents a token on the live connection; a refusal leaves it open', async () => {
    const { url, conns } = await fakeServer((frame, conn) => {
      const token = (frame.params as { token?: string } | undefined)?.token;
      if (frame.method === 'rpc.authenticate' && token === 'stale') return refused('user-changed');
      return frame.method === 'rpc.authenticate'
        ? { result: { sessionId: 's1', expiresAt: 42 } }
        : ok(frame, conn);
    });
    const c = client({ url });
    await c.opened();
    expect(await c.authenticate('fresh')).toEqual({ sessionId: 's1', expiresAt: 42 });
    const err = await c.authenticate('stale').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthenticationError);
    expect(err).toMatchObject({ code: -32010, reason: 'user-changed' });
    expect(c.state).toBe('open');
    expect(await c.call('still')).toBe('still');
    expect(conns).toHaveLength(1);
    await expect(c.authenticate()).rejects.toThrow(TypeError);
  });
});

describe('closes for credentials', () => {
  it('4403 (revoked): the pending call rejects with AuthenticationError and the client stops', async () => {
    const { url, conns } = await fakeServer((frame, conn) =>
      frame.method === 'slow' ? undefined : ok(frame, conn),
    );
    const c = client({ url });
    await c.opened();
    const pending = c.call('slow').catch((err: unknown) => err);
    await waitUntil(() => conns[0]!.frames.length === 1, 'the call');
    conns[0]!.socket.close(4403, 'revoked: left the team');
    const err = await pending;
    expect(err).toBeInstanceOf(AuthenticationError);
    expect(err).toMatchObject({ code: 4403, reason: 'revoked: left the team' });
    await waitUntil(() => c.state === 'closed', 'closed');
    expect(c.lastDisconnect).toMatchObject({ code: 4403, willRetry: false });
  });

  it('4401: a batch member still pending rejects with AuthenticationError, as a call does', async () => {
    const { url, conns } = await fakeServer((frame, conn) =>
      frame.method === 'slow' ? undefined : ok(frame, conn),
    );
    const c = client({ url });
    await c.opened();
    const sent = c.batch([{ method: 'slow' }, { method: 'slow' }]);
    await waitUntil(() => conns[0]!.frames.length === 1, 'the batch (one array frame)');
    conns[0]!.socket.close(4401, 'token revoked');
    const results = await sent;
    for (const result of results) {
      expect(result.status).toBe('rejected');
      expect((result as PromiseRejectedResult).reason).toBeInstanceOf(AuthenticationError);
      expect((result as PromiseRejectedResult).reason).toMatchObject({ code: 4401 });
    }
  });

  it('a subscribe unanswered when a 4419 close is retried with a fresh token is sent again', async () => {
    let subscribes = 0;
    const { url, conns } = await fakeServer((frame, conn) =>
      frame.method === 'subscribe' && ++subscribes === 1 ? undefined : ok(frame, conn),
    );
    let n = 0;
    const c = client({ url, getToken: () => `tok-${++n}` });
    await c.opened();
    const errors: unknown[] = [];
    c.subscribe('prices').subscribe({ error: (err: unknown) => errors.push(err) });
    await waitUntil(() => subscribes === 1, 'the first subscribe');
    conns[0]!.socket.close(4419, 'credentials expired');
    await waitUntil(() => subscribes === 2, 'the subscribe sent again on the next connection');
    expect(errors).toEqual([]);
    expect(conns[1]!.frames.map((f) => f.method)).toEqual(['rpc.authenticate', 'subscribe']);
  });

  it('4419 (expired) without a provider stops; with one it is retried once with a fresh token', async () => {
    const { url, conns } = await fakeServer();
    const plain = client({ url });
    await plain.opened();
    conns[0]!.socket.close(4419, 'credentials expired');
    await waitUntil(() => plain.state === 'closed', 'closed');
    expect(plain.lastDisconnect).toMatchObject({ code: 4419, willRetry: false });

    let n = 0;
    const withToken = client({ url, getToken: () => `tok-${++n}` });
    const events = collect(withToken);
    await withToken.opened();
    conns[1]!.socket.close(4419, 'credentials expired');
    await waitUntil(() => conns.length === 3 && withToken.state === 'open', 'the second dial');
    expect(conns[2]!.frames[0]).toMatchObject({
      method: 'rpc.authenticate',
      params: { token: 'tok-2' },
    });
    conns[2]!.socket.close(4419, 'credentials expired');
    await waitUntil(() => withToken.state === 'closed', 'closed after the one retry');
    expect(events.map((e) => [e.code, e.willRetry])).toEqual([
      [4419, true],
      [4419, false],
    ]);
  });
});

describe('inputs called before each dial', () => {
  it('url, headers and the header token come from their functions, every dial', async () => {
    const { url, conns } = await fakeServer();
    let dials = 0;
    const c = client({
      url: () => Promise.resolve(`${url}?dial=${++dials}`),
      headers: () => ({ 'x-dial': String(dials) }),
      getToken: async () => {
        await sleep(5);
        return `tok-${dials}`;
      },
      tokenTransport: 'header',
    });
    await c.opened();
    conns[0]!.socket.close(1012, 'restart');
    await waitUntil(() => conns.length === 2 && c.state === 'open', 'the second connection');
    expect(
      conns.map((conn) => [conn.url, conn.headers['x-dial'], conn.headers.authorization]),
    ).toEqual([
      ['/rpc?dial=1', '1', 'Bearer tok-1'],
      ['/rpc?dial=2', '2', 'Bearer tok-2'],
    ]);
    // The header token is not sent again in-band.
    expect(conns.flatMap((conn) => conn.frames).some((f) => f.method === 'rpc.authenticate')).toBe(
      false,
    );
    expect(c.url).toBe(`${url}?dial=2`);
  });

  it('a provider that throws is a failed dial, told on disconnects$, and retried', async () => {
    const { url } = await fakeServer();
    let calls = 0;
    const c = client({
      url,
      getToken: () =>
        ++calls === 1 ? Promise.reject(new Error('token service down')) : Promise.resolve('tok'),
    });
    const events = collect(c);
    await c.opened();
    expect(events).toEqual([{ error: new Error('token service down'), willRetry: true }]);
  });
});
