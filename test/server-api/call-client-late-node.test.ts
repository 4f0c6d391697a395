/**
 * callClient against a node that hears the request late (a pause, a slow broker): the asker's
 * window for a node to say it has the session passes, and its caller is told -32602 (or, by
 * user, that session is left out of `results`). The promise: a client is called only when its
 * answer is awaited. Told -32602, or left out, the client is never called; called, its answer
 * reaches the caller. The late node holds the call until the asker says `go` or `drop`
 * (src/server-api/node-requests.ts).
 *
 * The lateness is made by delaying, on node B, the delivery of the asker's `call` messages from
 * the broker (the one stand-in here: a broker that is slow on demand); everything else is two
 * real gateways sharing Redis, and NATS. The model (fast-check) draws the delay on both sides
 * of the window, and the invariant must hold wherever it lands.
 */
import fc from 'fast-check';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import { TestBrokers } from '../support/brokers.js';
import type { BrokerKind as Kind } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { waitFor } from '../support/waiting.js';
import { ApiResources, asUser, post, userOptions } from './support.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const natsUp = await canConnect(4222);
const res = new ApiResources();
const brokers = new TestBrokers();

/** The asker's window for a node to say it has the session (serverApi.countWindowMs). */
const WINDOW_MS = 100;

afterEach(async () => {
  await res.cleanup();
  await brokers.closeAll();
});

afterAll(() => brokers.deleteAll());

/** What node B's channel is given, and how: `call` messages delayed by `delayMs`, some dropped. */
interface Slowness {
  delayMs: number;
  /** Message kinds B never hears (a `go` lost, say). */
  lost: Set<string>;
  /** Kinds B heard, in order. */
  heard: string[];
}

/** B's node channel, delivering as `slow` says (installed before its server API opens it). */
function slowChannel(gateway: Pick<Gateway<unknown>, 'openNodeChannel'>, slow: Slowness): void {
  const open = gateway.openNodeChannel.bind(gateway);
  gateway.openNodeChannel = (receive) =>
    open((body) => {
      const kind = String((body as { t?: unknown }).t);
      if (slow.lost.has(kind)) return;
      const deliver = (): void => {
        slow.heard.push(kind);
        receive(body);
      };
      if (kind === 'call' && slow.delayMs > 0) setTimeout(deliver, slow.delayMs);
      else deliver();
    });
}

/**
 * Node A (asked), node B (slow as `slow` says), each with a client of user "ann" whose method
 * `where` counts its calls.
 */
/** The broker prefix each gateway of twoNodes shares. */
const prefixByGateway = new WeakMap<object, string>();
const prefixOf = (gateway: object): string => prefixByGateway.get(gateway)!;

async function twoNodes(kind: Kind, slow: Slowness, settingsOfB: Record<string, unknown> = {}) {
  const prefix = brokers.prefix(kind, 'wsrpclate');
  const calls = { a: 0, b: 0 };
  const nodes = [];
  for (const name of ['a', 'b'] as const) {
    const running = await res.gateway(userOptions(await brokers.open(kind, prefix)));
    prefixByGateway.set(running.gateway, prefix);
    if (name === 'b') slowChannel(running.gateway, slow);
    const api = await res.api(running.gateway, {
      countWindowMs: WINDOW_MS,
      ...(name === 'b' ? settingsOfB : {}),
    });
    const client = res.client(asUser(running.url, 'ann'));
    client.method('where', () => {
      calls[name]++;
      return name;
    });
    await client.call('rpc.ping');
    nodes.push({ ...running, api });
  }
  const [a, b] = nodes as [(typeof nodes)[0], (typeof nodes)[0]];
  return { a, b, calls, sessionOnB: [...b.gateway.sessions.keys()][0]! };
}

const count = (heard: string[], kind: string) => heard.filter((k) => k === kind).length;

for (const kind of ['redis', 'nats'] as const) {
  const up = kind === 'redis' ? redisUp : natsUp;
  describe.skipIf(!up && !mustRun)(`callClient and a node that hears it late (${kind})`, () => {
    it('by session: told -32602, the client is never called; heard in time, it is called once', async () => {
      const slow: Slowness = { delayMs: 0, lost: new Set(), heard: [] };
      const { a, calls, sessionOnB } = await twoNodes(kind, slow);
      const params = { sessionId: sessionOnB, method: 'where', timeoutMs: 10_000 };

      slow.delayMs = WINDOW_MS * 4;
      const late = await post(a.api.url, 'callClient', params);
      expect(late.body?.error).toMatchObject({ code: -32602, data: { field: 'sessionId' } });
      // B heard the call, said it has the session, and was told not to call it.
      await waitFor(() => count(slow.heard, 'drop') === 1, 'B told to drop the late call');
      expect(count(slow.heard, 'go')).toBe(0);
      expect(calls.b).toBe(0);

      slow.delayMs = 0;
      expect((await post(a.api.url, 'callClient', params)).body).toMatchObject({
        result: { result: 'b' },
      });
      expect(calls.b).toBe(1);
    });

    it('by user: a late node is left out of results, and its client is never called', async () => {
      const slow: Slowness = { delayMs: WINDOW_MS * 4, lost: new Set(), heard: [] };
      const { a, calls } = await twoNodes(kind, slow);
      const reply = await post(a.api.url, 'callClient', {
        user: 'ann',
        method: 'where',
        timeoutMs: 10_000,
      });
      expect(reply.body?.result).toEqual({
        results: [{ sessionId: expect.any(String), result: 'a' }],
      });
      await waitFor(() => count(slow.heard, 'drop') === 1, 'B told to drop the late call');
      expect(calls).toEqual({ a: 1, b: 0 });
    });

    it('a hold whose go is lost ends with the call not made: the caller hears -32012', async () => {
      const slow: Slowness = { delayMs: 0, lost: new Set(['go']), heard: [] };
      const { a, calls, sessionOnB } = await twoNodes(kind, slow);
      const reply = await post(a.api.url, 'callClient', {
        sessionId: sessionOnB,
        method: 'where',
        timeoutMs: 500,
      });
      expect(reply.body?.error).toMatchObject({ code: -32012 });
      expect(calls.b).toBe(0);
    });

    it('the calls a node holds are bounded by its maxPendingCalls: past it, -32000 at once', async () => {
      const slow: Slowness = { delayMs: 0, lost: new Set(['go']), heard: [] };
      const { a, calls, sessionOnB } = await twoNodes(kind, slow, { maxPendingCalls: 1 });
      const params = { sessionId: sessionOnB, method: 'where', timeoutMs: 3_000 };
      const first = post(a.api.url, 'callClient', params);
      await waitFor(() => count(slow.heard, 'call') === 1, 'B holding the first call');
      expect((await post(a.api.url, 'callClient', params)).body?.error).toMatchObject({
        code: -32000,
        data: { sessionId: sessionOnB, reason: 'too many pending calls', limit: 1 },
      });
      expect((await first).body?.error).toMatchObject({ code: -32012 });
      expect(calls.b).toBe(0);
    });

    it('mixed versions: a request without confirm is called at once; a node that does not hold is not sent go', async () => {
      const slow: Slowness = { delayMs: 0, lost: new Set(), heard: [] };
      const { a, b, calls, sessionOnB } = await twoNodes(kind, slow);
      // Node C speaks as a node of the version before holding did: its requests carry no
      // `confirm`, and it calls its clients as soon as it hears a request, saying `calling`
      // without `from`.
      const c = await res.gateway(userOptions(await brokers.open(kind, prefixOf(a.gateway))));
      const heardByC: Record<string, unknown>[] = [];
      const channel = await c.gateway.openNodeChannel((body) => {
        const message = body as Record<string, unknown>;
        heardByC.push(message);
        if (message['t'] !== 'call') return;
        const reply = (sent: unknown) => void channel.send(message['from'] as string, sent);
        reply({ t: 'calling', id: message['id'], sessions: [message['session']] });
        reply({
          t: 'answer',
          id: message['id'],
          answer: { sessionId: message['session'], result: 'c' },
        });
      });
      expect(
        (
          await post(a.api.url, 'callClient', {
            sessionId: `${c.gateway.nodeId}-someone`,
            method: 'where',
          })
        ).body,
      ).toMatchObject({ result: { result: 'c' } });
      expect(heardByC.filter((m) => m['t'] === 'go')).toEqual([]);

      await channel.send(b.gateway.nodeId, {
        t: 'call',
        id: 'old-request-1',
        from: c.gateway.nodeId,
        session: sessionOnB,
        method: 'where',
        timeoutMs: 5_000,
      });
      await waitFor(
        () => heardByC.some((m) => m['t'] === 'answer' && m['id'] === 'old-request-1'),
        "B's answer to the old node",
      );
      expect(heardByC.find((m) => m['t'] === 'answer')).toMatchObject({
        answer: { sessionId: sessionOnB, result: 'b' },
      });
      expect(heardByC.find((m) => m['t'] === 'calling')).not.toHaveProperty('from');
      expect(calls.b).toBe(1);
      await channel.close();
    });

    it('model: whatever the delay, a client is called exactly when its caller gets its answer', async () => {
      const slow: Slowness = { delayMs: 0, lost: new Set(), heard: [] };
      const { a, calls, sessionOnB } = await twoNodes(kind, slow);
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 0, max: WINDOW_MS * 2 }),
          fc.boolean(),
          async (delayMs, byUser) => {
            slow.delayMs = delayMs;
            const before = { ...calls, drops: count(slow.heard, 'drop') };
            const reply = await post(a.api.url, 'callClient', {
              ...(byUser ? { user: 'ann' } : { sessionId: sessionOnB }),
              method: 'where',
              timeoutMs: 10_000,
            });
            const body = reply.body as {
              result?: unknown;
              error?: { code: number };
            };
            const answeredByB = byUser
              ? (body.result as { results: { result: string }[] }).results.some(
                  (r) => r.result === 'b',
                )
              : (body.result as { result?: unknown } | undefined)?.result === 'b';
            if (!answeredByB) {
              if (!byUser) expect(body.error?.code).toBe(-32602);
              // B was told to drop it: from then on it cannot call its client.
              await waitFor(
                () => count(slow.heard, 'drop') === before.drops + 1,
                'B told to drop the late call',
              );
            }
            expect(calls.b - before.b).toBe(answeredByB ? 1 : 0);
          },
        ),
        { numRuns: 12 },
      );
    });
  });
}
