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

describe('refresh checks and the subscribe hook shares', () => {
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
        const open: { session: string; answer: () => void }[] = [];
        const client = {
          name: 'auth',
          call: (_method: string, params: { sessionId: string }) =>
            new Promise((resolve) => {
              const entry = { session: params.sessionId, answer: () => resolve({ allow: true }) };
              open.push(entry);
            }),
        } as unknown as JsonRpcHttpClient;
        const authorize = subscribeHook(
          {
            upstream: undefined as never,
            timeoutMs: 60_000,
            onFailure: 'refuse',
            topics: ['*'],
            maxConcurrentPerSession: 2,
            maxConcurrentPerAddress: 3,
            maxQueuedPerSession: 2,
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
