/**
 * callClient to a session whose own table of calls to its client is full (the gateway's
 * `limits.maxPendingCalls`): refused at once with -32000 Server busy, `data: { sessionId, reason,
 * limit }`, by session and by user alike, while the calls already held are answered once the
 * client answers them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../support/waiting.js';
import { ApiResources, asUser, post, userOptions } from './support.js';

const res = new ApiResources();
afterEach(() => res.cleanup());

const LIMIT = 4;

describe("callClient past the session's maxPendingCalls", () => {
  it('is -32000 Server busy naming the session and the limit, not -32011', async () => {
    const running = await res.gateway({ ...userOptions(), limits: { maxPendingCalls: LIMIT } });
    const api = await res.api(running.gateway);
    const client = res.client(asUser(running.url, 'held'));
    let held = 0;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    client.method('hold', async () => {
      held++;
      await released;
      return 'done';
    });
    await client.call('rpc.ping');
    const sessionId = [...running.gateway.sessions.values()].find((s) => s.user === 'held')!.id;
    const callClient = (params: Record<string, unknown>) =>
      post(api.url, 'callClient', { method: 'hold', timeoutMs: 60_000, ...params });

    const holding = Array.from({ length: LIMIT }, () => callClient({ sessionId }));
    await waitFor(() => held === LIMIT, `${LIMIT} calls held by the client`);

    const busy = {
      code: -32000,
      message: 'Too many calls to the client in progress',
      data: { sessionId, reason: 'too many pending calls', limit: LIMIT },
    };
    try {
      const bySession = await callClient({ sessionId });
      expect(bySession).toEqual({ status: 200, body: { jsonrpc: '2.0', id: 1, error: busy } });
      const byUser = await callClient({ user: 'held' });
      expect(byUser.body?.result).toEqual({ results: [{ sessionId, error: busy }] });
      expect(held).toBe(LIMIT);
    } finally {
      release();
    }
    for (const reply of await Promise.all(holding)) {
      expect(reply.body).toEqual({ jsonrpc: '2.0', id: 1, result: { result: 'done' } });
    }
  });
});
