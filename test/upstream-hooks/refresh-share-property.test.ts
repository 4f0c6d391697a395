// The subscribe hook under any mix of client subscribes and refresh checks (`refresh: true`)
// from sessions of one address: a refresh check is never refused, no share is ever exceeded,
// and once every call is answered every check has been asked and nothing is left waiting.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { noTracing } from '../../src/tracing/tracing.js';
import { HookMetrics } from '../../src/upstream-hooks/hook-metrics.js';
import { subscribeHook } from '../../src/upstream-hooks/subscribe-hook.js';
import type { JsonRpcHttpClient } from '../../src/upstream/json-rpc-http-client.js';

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The hook under test, its upstream a list of the calls it was asked, answered by the test. */
function hookWith(shares: { perSession: number; perAddress: number; queued: number }) {
  const open: { session: string; topic: string; answer: () => void }[] = [];
  const client = {
    name: 'auth',
    call: (_method: string, params: { sessionId: string; topic: string }) =>
      new Promise((resolve) => {
        open.push({
          session: params.sessionId,
          topic: params.topic,
          answer: () => resolve({ allow: true }),
        });
      }),
  } as unknown as JsonRpcHttpClient;
  const authorize = subscribeHook(
    {
      upstream: undefined as never,
      timeoutMs: 60_000,
      onFailure: 'refuse',
      topics: ['*'],
      maxConcurrentPerSession: shares.perSession,
      maxConcurrentPerAddress: shares.perAddress,
      maxQueuedPerSession: shares.queued,
    },
    client,
    {
      logger: silentLogger,
      tracing: noTracing,
      metrics: new HookMetrics(),
      userOf: () => undefined,
      contextOf: () => null,
    },
  );
  return { open, authorize };
}

describe('refresh checks and the subscribe hook shares', () => {
  it("a refresh waiting in its address's line gets the next slot given back, ahead of other sessions' queues", async () => {
    const { open, authorize } = hookWith({ perSession: 2, perAddress: 2, queued: 10 });
    const session = (id: string) => ({ id, context: null, remoteAddress: '203.0.113.7' });
    const [a, b] = [session('a'), session('b')];
    // a holds the address's two slots, and keeps five more subscribes waiting behind them.
    for (let i = 0; i < 7; i++) {
      void Promise.resolve(authorize({ session: a, topic: `a${i}`, params: undefined })).catch(
        () => undefined,
      );
    }
    const refreshed = Promise.resolve(
      authorize({ session: b, topic: 'b0', params: undefined, refresh: true }),
    );
    await flush();
    expect(open.map((o) => o.topic)).toEqual(['a0', 'a1']);
    open.shift()!.answer();
    await flush();
    // The slot a gave back is the waiting refresh's, not a's next subscribe's.
    expect(open.map((o) => o.topic)).toEqual(['a1', 'b0']);
    open.splice(1, 1)[0]!.answer();
    expect(await refreshed).toBe(true);
    // a's subscribes are asked in order as slots come back, none lost.
    while (open.length > 0) {
      open.shift()!.answer();
      await flush();
    }
  });

  it('are never refused, never exceed a share, and all end up asked', async () => {
    const step = fc.oneof(
      fc.record({
        kind: fc.constantFrom('subscribe' as const, 'refresh' as const),
        session: fc.nat(2),
        count: fc.integer({ min: 1, max: 6 }),
      }),
      fc.record({ kind: fc.constant('answer' as const), pick: fc.nat(20) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 40 }), async (steps) => {
        const { open, authorize } = hookWith({ perSession: 2, perAddress: 3, queued: 2 });
        const sessions = [0, 1, 2].map((i) => ({
          id: `s${i}`,
          context: null,
          remoteAddress: '203.0.113.7',
        }));
        const refreshes: Promise<unknown>[] = [];
        const inBounds = () => {
          expect(open.length).toBeLessThanOrEqual(3);
          for (const s of sessions) {
            expect(open.filter((o) => o.session === s.id).length).toBeLessThanOrEqual(2);
          }
        };
        for (const s of steps) {
          if (s.kind === 'answer') {
            open.splice(s.pick % Math.max(open.length, 1), 1)[0]?.answer();
          } else {
            const session = sessions[s.session]!;
            for (let i = 0; i < s.count; i++) {
              const refresh = s.kind === 'refresh';
              const check = Promise.resolve(
                authorize({ session, topic: `t${i}`, params: undefined, refresh }),
              );
              if (refresh) refreshes.push(check);
              else check.catch(() => undefined);
            }
          }
          await flush();
          inBounds();
        }
        while (open.length > 0) {
          open.shift()!.answer();
          await flush();
          inBounds();
        }
        // Every refresh check was asked and allowed (none refused busy).
        expect(await Promise.all(refreshes)).toEqual(refreshes.map(() => true));
      }),
      { numRuns: 150 },
    );
  });
});
