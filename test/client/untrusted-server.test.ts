/*
 * The client against a server that misbehaves (a plain `ws` server written by hand): a flood of
 * rpc.token requests, malformed responses to its calls, subscription frames no server should
 * send (a stream error nested thousands deep, a subscribe answered with no id, notifications for
 * ids not known yet past the bound on what is kept of them); and a batch whose entry has no
 * string method, from JavaScript.
 */
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { WebSocket, WebSocketServer } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, subscriptionStatus$ } from '../../src/client/index.js';
import { ORPHAN_TEXT_CHARS } from '../../src/client/subscriptions.js';
import type { ClientOptions, RpcClient } from '../../src/client/client.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { InternalError, JsonRpcError } from '../../src/protocol/errors.js';
import { deferred, rejectionOf } from '../support/promises.js';
import { waitFor } from '../support/waiting.js';

const servers: WebSocketServer[] = [];
const clients: RpcClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  for (const server of servers.splice(0)) {
    for (const socket of server.clients) socket.terminate();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A hand-driven server, and a client connected to it; `frames`: every text the client sent. */
async function connect(options: Partial<ClientOptions> = {}) {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  servers.push(server);
  await new Promise((resolve) => server.once('listening', resolve));
  const frames: string[] = [];
  const sockets: WebSocket[] = [];
  server.on('connection', (socket) => {
    sockets.push(socket);
    socket.on('message', (data) => frames.push((data as Buffer).toString('utf8')));
  });
  const { port } = server.address() as AddressInfo;
  const client = createClient({
    url: `ws://127.0.0.1:${port}/rpc`,
    WebSocket,
    heartbeat: false,
    ...options,
  });
  clients.push(client);
  await client.opened();
  await waitFor(() => sockets.length === 1, 'the connection');
  return { client, frames, socket: sockets[0]! };
}

describe('rpc.token from the server', () => {
  it('at most 256 run at once (beyond, -32000), and those running share one getToken', async () => {
    const token = deferred<string>();
    let asked = 0;
    // The dial's token at once; the rest wait for the test.
    const getToken = (): string | Promise<string> => (++asked === 1 ? 'dial' : token.promise);
    const { socket, frames } = await connect({ getToken, tokenTransport: 'header' });
    const before = asked;
    const flood = Array.from({ length: 300 }, (_, i) => ({
      jsonrpc: '2.0',
      method: 'rpc.token',
      params: { expiresAt: 0 },
      id: i + 1,
    }));
    const sentBefore = frames.length;
    socket.send(JSON.stringify(flood));
    await waitFor(() => asked > before, 'getToken');
    token.resolve('fresh');
    await waitFor(() => frames.length > sentBefore, 'the reply');
    const reply = JSON.parse(frames[sentBefore]!) as {
      id: number;
      result?: unknown;
      error?: unknown;
    }[];
    expect(asked - before).toBe(1);
    expect(reply.filter((r) => r.result !== undefined)).toEqual(
      flood.slice(0, 256).map(({ id }) => ({ jsonrpc: '2.0', result: { token: 'fresh' }, id })),
    );
    expect(reply.filter((r) => r.error !== undefined)).toEqual(
      flood.slice(256).map(({ id }) => ({
        jsonrpc: '2.0',
        error: { code: ErrorCode.ServerBusy, message: 'Server busy', data: { maxInFlight: 256 } },
        id,
      })),
    );
  });

  it('one asked after the last getToken settled calls it again', async () => {
    let asked = 0;
    const { socket, frames } = await connect({
      getToken: () => `t${++asked}`,
      tokenTransport: 'header',
    });
    const before = asked;
    const answers: unknown[] = [];
    for (const id of [1, 2]) {
      const sent = frames.length;
      socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'rpc.token', id }));
      await waitFor(() => frames.length > sent, 'the reply');
      answers.push(JSON.parse(frames[sent]!));
    }
    expect(answers).toEqual([
      { jsonrpc: '2.0', result: { token: `t${before + 1}` }, id: 1 },
      { jsonrpc: '2.0', result: { token: `t${before + 2}` }, id: 2 },
    ]);
  });
});

describe('a malformed response to a call', () => {
  it('rejects it at once with -32603 "Malformed response", without a timeout to end it', async () => {
    const { client, socket, frames } = await connect({ callTimeoutMs: 0 });
    const bodies: Record<string, (id: unknown) => unknown> = {
      both: (id) => ({ jsonrpc: '2.0', id, result: 1, error: { code: -32000, message: 'x' } }),
      badError: (id) => ({ jsonrpc: '2.0', id, error: { code: 'E42', message: 'boom' } }),
      noVersion: (id) => ({ id, result: 42 }),
    };
    const calls = Object.keys(bodies).map((method) => rejectionOf(client.call(method)));
    await waitFor(() => frames.length === 3, 'the calls');
    for (const text of frames) {
      const { method, id } = JSON.parse(text) as { method: string; id: unknown };
      socket.send(JSON.stringify(bodies[method]!(id)));
    }
    const errors = await Promise.all(calls);
    for (const err of errors) expect(err).toBeInstanceOf(InternalError);
    expect(errors.map((e) => (e as InternalError).data)).toEqual([
      { reason: 'both "result" and "error"' },
      { reason: 'malformed "error"' },
      { reason: 'missing or wrong "jsonrpc" member' },
    ]);
    expect(client.state).toBe('open');
  });
});

describe('a batch entry whose method is not a string', () => {
  it('rejects the whole batch with a TypeError and sends nothing, connected or not', async () => {
    const { client, socket, frames } = await connect({ callTimeoutMs: 0 });
    const entries = [{ method: 'fine' }, {}] as never;
    expect(await rejectionOf(client.batch(entries))).toBeInstanceOf(TypeError);
    // The next call is the first frame the server sees.
    const echo = client.call('echo');
    await waitFor(() => frames.length === 1, 'the call');
    expect(JSON.parse(frames[0]!)).toMatchObject({ method: 'echo' });
    socket.send(JSON.stringify({ jsonrpc: '2.0', result: 'ok', id: JSON.parse(frames[0]!).id }));
    expect(await echo).toBe('ok');

    // Disconnected: refused before it is queued.
    socket.terminate();
    await waitFor(() => client.state !== 'open', 'the drop');
    expect(await rejectionOf(client.batch(entries))).toBeInstanceOf(TypeError);
  });
});

interface Request {
  method: string;
  id: unknown;
  params: unknown[];
}

/** The first subscribe the server reads from frame `from` on. */
async function nextSubscribe(frames: string[], from: number): Promise<Request> {
  const subscribeAt = (): number =>
    frames.findIndex(
      (text, i) => i >= from && (JSON.parse(text) as Request).method === 'subscribe',
    );
  await waitFor(() => subscribeAt() >= 0, 'the subscribe');
  return JSON.parse(frames[subscribeAt()]!) as Request;
}

/** A subscription notification with these params, as a server writes it. */
const subscriptionFrame = (params: Record<string, unknown>): string =>
  JSON.stringify({ jsonrpc: '2.0', method: 'subscription', params });

/** What `observable` gave: its values, and the error it ended with, if any. */
function observe(observable: { subscribe(o: object): unknown }) {
  const seen = { values: [] as unknown[], error: undefined as unknown };
  observable.subscribe({
    next: (value: unknown) => seen.values.push(value),
    error: (error: unknown) => (seen.error = error),
  });
  return seen;
}

describe('subscription frames no server should send', () => {
  it('a stream error nested 100,000 deep ends the subscription with -32603, and nothing throws', async () => {
    const { client, socket, frames } = await connect();
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    // For an id nobody subscribed to: read and kept aside, no throw out of the socket's handler.
    socket.send(
      `{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"0xdead","error":${deep}}}`,
    );
    const seen = observe(client.subscribe('t'));
    const { id } = await nextSubscribe(frames, 0);
    socket.send(JSON.stringify({ jsonrpc: '2.0', result: '0x1', id }));
    socket.send(
      `{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"0x1","error":${deep}}}`,
    );
    await waitFor(() => seen.error !== undefined, 'the end of the subscription');
    expect(seen.error).toBeInstanceOf(JsonRpcError);
    expect((seen.error as JsonRpcError).code).toBe(ErrorCode.InternalError);
    expect((seen.error as JsonRpcError).message).toBe(
      'the stream ended with an error: a value nested too deep to quote',
    );
    expect(client.state).toBe('open');
  });

  it('a subscribe answered with no subscription id fails as a malformed response, not waiting for ever', async () => {
    const { client, socket, frames } = await connect();
    // The last one as written on the wire (a number JSON.parse reads as Infinity).
    for (const [i, result] of [true, null, {}, [1], '1.5e400'].entries()) {
      const topic = `t${i}`;
      const statuses: string[] = [];
      subscriptionStatus$(client, topic).subscribe((status) => statuses.push(status.state));
      const seen = observe(client.subscribe(topic));
      const { id } = await nextSubscribe(frames, frames.length);
      const text = JSON.stringify({ jsonrpc: '2.0', result: '@', id }).replace(
        '"@"',
        result === '1.5e400' ? result : JSON.stringify(result),
      );
      socket.send(text);
      await waitFor(() => seen.error !== undefined, `the failure of ${text}`);
      expect(seen.error).toBeInstanceOf(InternalError);
      expect((seen.error as InternalError).message).toBe('Malformed response');
      expect((seen.error as InternalError).data).toEqual({
        reason: 'the subscribe was answered with no subscription id',
      });
      expect(statuses.at(-1)).toBe('error');
    }
    expect(client.state).toBe('open');
  });

  it("a subscribe answered with another held subscription's id fails, and the other keeps its messages", async () => {
    const { client, socket, frames } = await connect();
    const first = observe(client.subscribe('a'));
    const firstAsk = await nextSubscribe(frames, 0);
    socket.send(JSON.stringify({ jsonrpc: '2.0', result: '0x1', id: firstAsk.id }));
    const asked = frames.length;
    const second = observe(client.subscribe('b'));
    const secondAsk = await nextSubscribe(frames, asked);
    socket.send(JSON.stringify({ jsonrpc: '2.0', result: '0x1', id: secondAsk.id }));
    await waitFor(() => second.error !== undefined, 'the failure of the second');
    expect(second.error).toBeInstanceOf(InternalError);
    expect((second.error as InternalError).data).toEqual({
      reason: "the subscribe was answered with another subscription's id",
    });
    socket.send(subscriptionFrame({ subscription: '0x1', seq: 1, result: 'for a' }));
    await waitFor(() => first.values.length === 1, "the first one's message");
    expect(first.values).toEqual(['for a']);
    expect(second.values).toEqual([]);
    expect(first.error).toBeUndefined();
    // Nothing ended the first one's id on the server.
    expect(frames.map((text) => (JSON.parse(text) as Request).method)).not.toContain('unsubscribe');
    expect(client.state).toBe('open');
  });

  it('notifications for an id not known yet are kept within ORPHAN_TEXT_CHARS of their frames', async () => {
    const { client, socket, frames } = await connect();
    const seen = observe(client.subscribeWithMeta<string>('t'));
    const { id } = await nextSubscribe(frames, 0);
    // Messages 1..20 of ~1 MiB each before the reply that names their id: more than the bound.
    const big = 'x'.repeat(1024 * 1024);
    const frameOf = (seq: number): string =>
      subscriptionFrame({ subscription: '0x1', seq, result: big });
    for (let seq = 1; seq <= 20; seq++) socket.send(frameOf(seq));
    socket.send(JSON.stringify({ jsonrpc: '2.0', result: '0x1', id }));
    const kept = Math.floor(ORPHAN_TEXT_CHARS / frameOf(10).length);
    expect(kept).toBeLessThan(20);
    await waitFor(() => seen.values.length >= kept, 'the messages kept');
    // The next one live: the hole where the dropped ones were is filled by a resubscribe (the
    // old id unsubscribed first).
    socket.send(frameOf(21));
    const resubscribe = await nextSubscribe(frames, 1);
    expect(JSON.parse(frames[1]!)).toMatchObject({ method: 'unsubscribe', params: ['0x1'] });
    expect(resubscribe.params[2]).toMatchObject({ since: kept });
    expect(seen.values.map((event) => (event as { seq: number }).seq)).toEqual(
      Array.from({ length: kept }, (_, i) => i + 1),
    );
    expect(seen.error).toBeUndefined();
  });

  it("messages kept past their stream's end are given up, not kept again for the next subscribe naming that id", async () => {
    const { client, socket, frames } = await connect();
    const first = observe(client.subscribeWithMeta<string>('t'));
    let completed = false;
    const ended = client.subscribeWithMeta<string>('t').subscribe({
      complete: () => (completed = true),
    });
    const { id } = await nextSubscribe(frames, 0);
    const message = (seq: number): string =>
      subscriptionFrame({ subscription: '0x1', seq, result: `old ${seq}` });
    // Before the reply: a message, the stream's end, then more no stream is left to take.
    socket.send(message(1));
    socket.send(subscriptionFrame({ subscription: '0x1', complete: true }));
    for (let seq = 2; seq <= 4; seq++) socket.send(message(seq));
    socket.send(JSON.stringify({ jsonrpc: '2.0', result: '0x1', id }));
    await waitFor(() => completed, 'the end of the first stream');
    ended.unsubscribe();
    expect(first.values).toMatchObject([{ data: 'old 1', seq: 1 }]);

    // A server may hand the same id out again: the new stream starts with what is sent now.
    const second = observe(client.subscribeWithMeta<string>('u'));
    const again = await nextSubscribe(frames, 1);
    socket.send(JSON.stringify({ jsonrpc: '2.0', result: '0x1', id: again.id }));
    socket.send(subscriptionFrame({ subscription: '0x1', seq: 1, result: 'new 1' }));
    await waitFor(() => second.values.length > 0, 'the message of the new stream');
    expect(second.values).toEqual([{ data: 'new 1', seq: 1 }]);
    expect(second.error).toBeUndefined();
  });
});

describe('notifications without sequence numbers before their subscribe reply', () => {
  const unnumbered = (subscription: string, k: number): string =>
    subscriptionFrame({ subscription, result: k });

  it('past the 256 kept for an id, those dropped are told as one gap signal after the kept ones', async () => {
    const { client, socket, frames } = await connect();
    const seen = observe(client.subscribeWithMeta<number>('t'));
    const { id } = await nextSubscribe(frames, 0);
    for (let k = 1; k <= 300; k++) socket.send(unnumbered('0x1', k));
    socket.send(JSON.stringify({ jsonrpc: '2.0', result: '0x1', id }));
    socket.send(unnumbered('0x1', 301));
    await waitFor(() => seen.values.length === 258, 'the kept, the gap signal and the live one');
    const values = seen.values as { data: unknown; gap?: number | null }[];
    expect(values.slice(0, 256).map((v) => v.data)).toEqual(
      Array.from({ length: 256 }, (_, i) => i + 1),
    );
    expect(values[256]).toMatchObject({ data: undefined, gap: 44 });
    expect(values[257]).toMatchObject({ data: 301 });
    expect(seen.error).toBeUndefined();
  });

  it('an id whose kept messages were dropped for a 65th id hears of them all as a gap', async () => {
    const { client, socket, frames } = await connect();
    const seen = observe(client.subscribeWithMeta<number>('t'));
    const { id } = await nextSubscribe(frames, 0);
    for (let k = 1; k <= 3; k++) socket.send(unnumbered('0x1', k));
    // 64 other ids not known yet: the first one's kept messages make room for the last.
    for (let other = 2; other <= 65; other++) socket.send(unnumbered(`0x${other.toString(16)}`, 0));
    socket.send(JSON.stringify({ jsonrpc: '2.0', result: '0x1', id }));
    socket.send(unnumbered('0x1', 4));
    await waitFor(() => seen.values.length === 2, 'the gap signal and the live one');
    expect(seen.values[0]).toMatchObject({ data: undefined, gap: 3 });
    expect(seen.values[1]).toMatchObject({ data: 4 });
  });

  it('model: of the messages sent for an id before its reply, each is delivered in order or counted in the one gap signal', async () => {
    // The client's bounds, as the model keeps them: 256 messages for each of 64 ids, the oldest
    // id's pushed out for a new one.
    const PER_ID = 256;
    const IDS = 64;
    const idArb = fc.oneof(
      { weight: 2, arbitrary: fc.constant(1) },
      { weight: 3, arbitrary: fc.integer({ min: 2, max: 80 }) },
    );
    const runs = fc.array(fc.tuple(idArb, fc.integer({ min: 1, max: 400 })), {
      minLength: 1,
      maxLength: 12,
    });
    await fc.assert(
      fc.asyncProperty(runs, async (bursts) => {
        const { client, socket, frames } = await connect();
        try {
          const seen = observe(client.subscribeWithMeta<number>('t'));
          const { id } = await nextSubscribe(frames, 0);
          const kept = new Map<number, number[]>();
          let sent = 0;
          let k = 0;
          for (const [sub, count] of bursts) {
            for (let i = 0; i < count; i++, k++) {
              socket.send(unnumbered(`0x${sub.toString(16)}`, k));
              if (sub === 1) sent++;
              let list = kept.get(sub);
              if (!list) {
                if (kept.size >= IDS) kept.delete(kept.keys().next().value!);
                kept.set(sub, (list = []));
              }
              if (list.length < PER_ID) list.push(k);
            }
          }
          socket.send(JSON.stringify({ jsonrpc: '2.0', result: '0x1', id }));
          socket.send(unnumbered('0x1', -1));
          await waitFor(
            () => (seen.values.at(-1) as { data?: unknown } | undefined)?.data === -1,
            'the live message',
          );
          const delivered = kept.get(1) ?? [];
          // Each message as its data, the gap signal as { gap }.
          const values = (seen.values.slice(0, -1) as { data: unknown; gap?: number | null }[]).map(
            (v) => (v.gap === undefined ? v.data : { gap: v.gap, data: v.data }),
          );
          const expected: unknown[] = [...delivered];
          if (sent > delivered.length)
            expected.push({ gap: sent - delivered.length, data: undefined });
          expect(values).toEqual(expected);
        } finally {
          await client.close();
        }
      }),
      { numRuns: 20 },
    );
  });

  it('numbered ones dropped are not counted: the resubscribe fills their hole instead', async () => {
    const { client, socket, frames } = await connect();
    const seen = observe(client.subscribeWithMeta<number>('t'));
    const { id } = await nextSubscribe(frames, 0);
    const numbered = (seq: number): string =>
      subscriptionFrame({ subscription: '0x1', seq, result: seq });
    for (let seq = 1; seq <= 300; seq++) socket.send(numbered(seq));
    socket.send(JSON.stringify({ jsonrpc: '2.0', result: '0x1', id }));
    await waitFor(() => seen.values.length === 256, 'the kept ones');
    socket.send(numbered(301));
    const resubscribe = await nextSubscribe(frames, 1);
    expect(resubscribe.params[2]).toMatchObject({ since: 256 });
    expect((seen.values as { gap?: unknown }[]).filter((v) => v.gap !== undefined)).toEqual([]);
  });
});

describe('inbox messages no server should send', () => {
  it('one without a method is not passed on, and is told on inboxGaps$ as one that will not arrive', async () => {
    const { client, socket, frames } = await connect({ inbox: true });
    const gaps = observe(client.inboxGaps$);
    const notified = observe(client.notificationsOf('order.shipped'));
    const { id, params } = await nextSubscribe(frames, 0);
    expect(params[0]).toBe('$inbox');
    socket.send(JSON.stringify({ jsonrpc: '2.0', result: '0x1', id }));
    const message = (seq: number, result: unknown): string =>
      subscriptionFrame({ subscription: '0x1', seq, result });
    socket.send(message(1, { method: 'order.shipped', params: { id: 1 } }));
    socket.send(message(2, { params: { id: 2 } }));
    socket.send(message(3, { method: 'order.shipped', params: { id: 3 } }));

    await waitFor(() => notified.values.length === 2, 'the two well-formed messages');
    expect(notified.values).toEqual([{ id: 1 }, { id: 3 }]);
    expect(gaps.values).toEqual([{ gap: 1 }]);
    expect(client.state).toBe('open');
  });
});
