// The subscribe hook's shares against a model: each session holds at most
// maxConcurrentPerSession hook calls in flight, the sessions of one client address group (IPv6
// by /64; none for a session without an address) at most maxConcurrentPerAddress together, a
// session's subscribes are asked in the order they came, at most maxQueuedPerSession wait, and
// a session past the address's share with no call of its own is refused at once. When every
// call has been answered, nothing is in flight or waiting.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { noTracing } from '../../src/tracing/tracing.js';
import { HookMetrics } from '../../src/upstream-hooks/hook-metrics.js';
import type { SubscribeHookConfig } from '../../src/upstream-hooks/hooks-config.js';
import { subscribeHook } from '../../src/upstream-hooks/subscribe-hook.js';
import type { JsonRpcHttpClient } from '../../src/upstream/json-rpc-http-client.js';
import { UpstreamError } from '../../src/upstream/upstream-error.js';

const SESSIONS: readonly { address: string | undefined; group: string | undefined }[] = [
  { address: '10.0.0.1', group: 'v4' },
  { address: '10.0.0.1', group: 'v4' },
  { address: '::ffff:10.0.0.1', group: 'v4' },
  { address: '2001:db8:1:2::5', group: 'v6' },
  { address: '2001:db8:1:2:ffff::9', group: 'v6' },
  { address: undefined, group: undefined },
];

/** A hook upstream whose calls stay open until the test answers them. */
function heldClient() {
  const open: { topic: string; answer: () => void }[] = [];
  const client = {
    name: 'auth',
    call(_method: string, params: { topic: string }) {
      return new Promise((resolve) => {
        const entry = {
          topic: params.topic,
          answer: () => {
            open.splice(open.indexOf(entry), 1);
            resolve({ allow: true });
          },
        };
        open.push(entry);
      });
    },
  };
  return { open, client: client as unknown as JsonRpcHttpClient };
}

interface ModelSession {
  running: number;
  waiting: string[];
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("the subscribe hook's shares against a model", () => {
  it('asks, queues and refuses as the model says, never past a share, and ends with nothing held', async () => {
    const step = fc.oneof(
      fc.record({ kind: fc.constant('subscribe' as const), session: fc.nat(SESSIONS.length - 1) }),
      fc.record({ kind: fc.constant('answer' as const), pick: fc.nat(20) }),
    );
    const shares = fc
      .integer({ min: 1, max: 5 })
      .chain((perAddress) =>
        fc.tuple(
          fc.constant(perAddress),
          fc.integer({ min: 1, max: perAddress }),
          fc.integer({ min: 0, max: 3 }),
        ),
      );
    await fc.assert(
      // Full-length runs: at fast-check's default size a run is ~5 steps, and no session ever
      // had two subscribes waiting (to be asked in order) in 200 runs.
      fc.asyncProperty(
        shares,
        fc.array(step, { maxLength: 50, size: 'max' }),
        async (bounds, steps) => {
          const [perAddress, perSession, maxQueued] = bounds;
          const { open, client } = heldClient();
          const config = {
            upstream: undefined as never,
            timeoutMs: 1_000_000,
            onFailure: 'refuse',
            topics: ['*'],
            maxConcurrentPerSession: perSession,
            maxConcurrentPerAddress: perAddress,
            maxQueuedPerSession: maxQueued,
          } satisfies SubscribeHookConfig;
          const authorize = subscribeHook(config, client, {
            logger: silentLogger,
            tracing: noTracing,
            metrics: new HookMetrics(),
            userOf: () => undefined,
            contextOf: (session) => session.context,
          });
          const sessions = SESSIONS.map((s, i) => ({
            id: `s${i}`,
            context: null,
            ...(s.address === undefined ? {} : { remoteAddress: s.address }),
          }));
          const model: ModelSession[] = SESSIONS.map(() => ({ running: 0, waiting: [] }));
          /** Topics asked, in the order the model expects them asked. */
          const asked = new Set<string>();
          const answers: Promise<boolean>[] = [];
          const ofGroup = (group: string) =>
            model.reduce((n, m, i) => n + (SESSIONS[i]!.group === group ? m.running : 0), 0);
          let next = 0;
          for (const s of steps) {
            if (s.kind === 'subscribe') {
              const m = model[s.session]!;
              const group = SESSIONS[s.session]!.group;
              const topic = `s${s.session}.${next++}`;
              const addressFull = group !== undefined && ofGroup(group) >= perAddress;
              const queue =
                m.running >= perSession || m.waiting.length > 0 || (addressFull && m.running > 0);
              const refusal =
                queue && m.waiting.length >= maxQueued
                  ? 'maxQueuedPerSession'
                  : !queue && addressFull
                    ? 'maxConcurrentPerAddress'
                    : undefined;
              const answer = Promise.resolve(
                authorize({ session: sessions[s.session]!, topic, params: undefined }),
              );
              if (refusal !== undefined) {
                const err = await answer.then(
                  () => undefined,
                  (e: unknown) => e,
                );
                expect(err).toBeInstanceOf(UpstreamError);
                expect((err as UpstreamError).data).toMatchObject({ bound: refusal });
                continue;
              }
              answers.push(answer);
              if (queue) m.waiting.push(topic);
              else {
                m.running++;
                asked.add(topic);
              }
            } else {
              if (open.length === 0) continue;
              const entry = open[s.pick % open.length]!;
              const session = Number(entry.topic.slice(1, entry.topic.indexOf('.')));
              const m = model[session]!;
              entry.answer();
              asked.delete(entry.topic);
              const woken = m.waiting.shift();
              if (woken === undefined) m.running--;
              else asked.add(woken);
            }
            await flush();
            expect(new Set(open.map((o) => o.topic))).toEqual(asked);
            model.forEach((m, i) => {
              expect(open.filter((o) => o.topic.startsWith(`s${i}.`))).toHaveLength(m.running);
              expect(m.running).toBeLessThanOrEqual(perSession);
              expect(m.waiting.length).toBeLessThanOrEqual(maxQueued);
            });
            for (const group of ['v4', 'v6'])
              expect(ofGroup(group)).toBeLessThanOrEqual(perAddress);
          }
          while (open.length > 0) {
            open[0]!.answer();
            await flush();
          }
          expect(await Promise.all(answers)).toEqual(answers.map(() => true));
          // Every share given back: fresh sessions of each address take its whole share again.
          for (const address of ['10.0.0.1', '2001:db8:1:2::7']) {
            const fresh = () => ({ id: `f${next++}`, context: null, remoteAddress: address });
            const held = Array.from({ length: perAddress }, (_, i) =>
              Promise.resolve(
                authorize({ session: fresh(), topic: `again.${i}`, params: undefined }),
              ),
            );
            await flush();
            expect(open).toHaveLength(perAddress);
            await expect(
              Promise.resolve(authorize({ session: fresh(), topic: 'over', params: undefined })),
            ).rejects.toMatchObject({ data: { bound: 'maxConcurrentPerAddress' } });
            while (open.length > 0) open[0]!.answer();
            expect(await Promise.all(held)).toEqual(held.map(() => true));
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
