import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { Sum } from '../../demo/service.js';
import { ConnectionClosedError, ErrorCode, JsonRpcError } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { closeOf, silentWebSocket } from '../support/sockets.js';
import { recordStates, waitForState } from '../support/client.js';
import { rejectionOf } from '../support/promises.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** A `sum` request whose text is exactly `bytes` long. */
function sumRequestOfSize(bytes: number, id = 1): string {
  const base = JSON.stringify({ jsonrpc: '2.0', method: 'sum', params: [0], id, pad: '' });
  const text = JSON.stringify({
    jsonrpc: '2.0',
    method: 'sum',
    params: [0],
    id,
    pad: 'x'.repeat(bytes - base.length),
  });
  expect(Buffer.byteLength(text)).toBe(bytes);
  return text;
}

describe('limits', () => {
  it('accepts a message of exactly maxMessageBytes and closes with 1009 beyond it', async () => {
    const { url, gateway } = await res.demoGateway({ limits: { maxMessageBytes: 1024 } });
    const raw = await res.raw(url);
    raw.socket.send(sumRequestOfSize(1024, 1));
    const [reply] = await raw.waitFor(1);
    expect(JSON.parse(reply!)).toEqual({ jsonrpc: '2.0', result: 0, id: 1 });

    const closed = closeOf(raw.socket);
    const disconnected = firstValueFrom(gateway.disconnected$);
    raw.socket.send(sumRequestOfSize(1025, 2));
    expect((await closed).code).toBe(1009);
    expect(raw.frames).toHaveLength(1);
    // (Server side, ws reports 1006: it stops reading after the oversized frame, so it
    // never sees the client's echo of the 1009 close frame.)
    const session = await disconnected;
    expect(session.isClosed).toBe(true);
    expect(gateway.sessions.size).toBe(0);
  });

  it('an RpcClient whose call is too large sees ConnectionClosedError 1009, then reconnects', async () => {
    const { url } = await res.demoGateway({ limits: { maxMessageBytes: 2048 } });
    const client = res.client(url);
    await client.opened();
    const huge = Array.from({ length: 1000 }, (_, i) => i);
    const err = await rejectionOf(client.call(Sum, huge));
    expect(err).toBeInstanceOf(ConnectionClosedError);
    expect(err).toMatchObject({ closeCode: 1009 });
    await waitForState(client, 'open');
    expect(await client.call(Sum, [1, 2])).toBe(3);
  });

  it('answers a batch longer than maxBatch with a single -32002 error', async () => {
    const { url } = await res.demoGateway({ limits: { maxBatch: 3 } });
    const raw = await res.raw(url);
    const member = (id: number) => ({ jsonrpc: '2.0', method: 'sum', params: [id], id });
    raw.socket.send(JSON.stringify([member(1), member(2), member(3)]));
    raw.socket.send(JSON.stringify([member(4), member(5), member(6), member(7)]));
    const frames = (await raw.waitFor(2)).map((f) => JSON.parse(f) as unknown);
    expect(frames[0]).toHaveLength(3);
    expect(frames[1]).toEqual({
      jsonrpc: '2.0',
      error: { code: -32002, message: 'Batch too large', data: { maxBatch: 3, received: 4 } },
      id: null,
    });
    // The connection stays open.
    raw.socket.send(JSON.stringify(member(8)));
    const third = await raw.waitFor(3);
    expect(JSON.parse(third[2]!)).toEqual({ jsonrpc: '2.0', result: 8, id: 8 });
  });

  it('client.batch beyond maxBatch: every member rejects with the -32002 the server sent', async () => {
    // The single error for an over-long batch carries id null; the client matches it to the
    // batch it sent (by data.received) instead of leaving the calls to time out.
    const { url } = await res.demoGateway({ limits: { maxBatch: 2 } });
    const client = res.client(url, { callTimeoutMs: 60_000 });
    const results = await client.batch([
      { method: 'sum', params: [1] },
      { method: 'sum', params: [2] },
      { method: 'sum', params: [3] },
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const r of results) {
      const reason = (r as PromiseRejectedResult).reason as JsonRpcError;
      expect(reason).toBeInstanceOf(JsonRpcError);
      expect(reason.code).toBe(-32002);
    }
    expect(await client.call(Sum, [1, 1])).toBe(2);
  });

  it('answers JSON nested deeper than maxDepth with -32600, data.maxDepth', async () => {
    const { url } = await res.demoGateway({ limits: { maxDepth: 8 } });
    const raw = await res.raw(url);
    let deep: unknown = 1;
    for (let i = 0; i < 20; i++) deep = [deep];
    raw.socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'sum', params: deep, id: 1 }));
    const [reply] = await raw.waitFor(1);
    const parsed = JSON.parse(reply!);
    expect(parsed.id).toBeNull();
    expect(parsed.error).toEqual({
      code: ErrorCode.InvalidRequest,
      message: 'Invalid Request',
      data: { maxDepth: 8 },
    });
  });

  it('gateway.close() closes sessions with 1001; a reconnecting client goes to reconnecting', async () => {
    const { url, gateway } = await res.demoGateway();
    const raw = await res.raw(url);
    const client = res.client(url);
    await client.opened();
    const rawClosed = closeOf(raw.socket);
    const { states } = recordStates(client);

    await gateway.close();
    expect(await rawClosed).toEqual({ code: 1001, reason: 'server shutting down' });
    await waitForState(client, 'reconnecting');
    expect(states.slice(0, 2)).toEqual(['open', 'reconnecting']);
    expect(gateway.sessions.size).toBe(0);
  });

  it('gateway.close() with reconnect: false leaves the client closed', async () => {
    const { url, gateway } = await res.demoGateway();
    const client = res.client(url, { reconnect: false });
    await client.opened();
    const { done } = recordStates(client);
    await gateway.close();
    expect(await done).toEqual(['open', 'closed']);
    expect(client.state).toBe('closed');
  });

  it('gateway.close() uses the code and reason it is given', async () => {
    const { url, gateway } = await res.demoGateway();
    const raw = await res.raw(url);
    const closed = closeOf(raw.socket);
    await gateway.close({ code: 1012, reason: 'restarting' });
    expect(await closed).toEqual({ code: 1012, reason: 'restarting' });
  });

  it('disconnected$ emits each session once it is gone', async () => {
    const { url, gateway } = await res.demoGateway();
    const client = res.client(url);
    const connected = await firstValueFrom(gateway.connected$);
    const gone = firstValueFrom(gateway.disconnected$);
    await client.close();
    const session = await gone;
    expect(session).toBe(connected);
    expect(session.isClosed).toBe(true);
    expect(gateway.sessions.has(session.id)).toBe(false);
  });

  it('rejects server-to-client calls beyond limits.maxPendingCalls locally', async () => {
    const { url, gateway } = await res.demoGateway({ limits: { maxPendingCalls: 2 } });
    const client = res.client(url);
    client.method(
      'client.wait',
      (_p, ctx) => new Promise((r) => ctx.signal.addEventListener('abort', r)),
    );
    await client.opened();
    const [session] = [...gateway.sessions.values()];
    const a = rejectionOf(session!.call('client.wait', undefined, { timeoutMs: 0 }));
    const b = rejectionOf(session!.call('client.wait', undefined, { timeoutMs: 0 }));
    const third = await rejectionOf(session!.call('client.wait'));
    expect(third).toMatchObject({ name: 'TooManyPendingCallsError', limit: 2 });
    expect(third).not.toBeInstanceOf(JsonRpcError);
    session!.close();
    for (const err of await Promise.all([a, b])) expect(err).toBeInstanceOf(ConnectionClosedError);
  });
  it('heartbeat: a client that never answers pings is cut off; a live client stays', async () => {
    const { url, port, gateway } = await res.demoGateway({ heartbeatIntervalMs: 50 });
    const client = res.client(url);
    await client.opened();
    const [liveSession] = [...gateway.sessions.values()];
    const gone = firstValueFrom(gateway.disconnected$);
    const silent = await silentWebSocket(res, port);
    const cutOff = new Promise<void>((resolve) => silent.socket.once('close', () => resolve()));
    await cutOff;
    const goneSession = await gone;
    expect(goneSession).not.toBe(liveSession);
    expect(await goneSession.closed).toMatchObject({ code: 1006 });
    // The ws client answered every ping meanwhile, so its session is the same one.
    expect(client.state).toBe('open');
    expect([...gateway.sessions.values()]).toEqual([liveSession]);
    expect(await client.call(Sum, [4, 4])).toBe(8);
  });
});
