// Calls given up (rpc.cancel, a disconnect, the route timeout) while their HTTP request waits in
// the upstream's pool queue: undici keeps such a request, body and all, until a socket frees, so
// the call keeps its maxConcurrent slot until then. The caller is answered at once all the same.
// A configuration file gives a pool a socket for every call admitted, so no request waits there;
// the endpoint (JsonRpcHttpClient) takes fewer, and these tests give it one to have a queue.
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { scrape, sampleValue } from '../support/metrics.js';
import { startPythonUpstream } from '../support/python-upstream.js';
import type { PythonUpstream } from '../support/python-upstream.js';
import { RawRpc } from '../support/raw-rpc.js';
import type { WireFrame } from '../support/raw-rpc.js';
import { waitFor } from '../support/waiting.js';
import { resolveUpstreamsConfig } from '../../src/upstream/index.js';
import type { HttpUpstreamConfig, UpstreamsConfig } from '../../src/upstream/index.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

const MAX_CONCURRENT = 4;
/** Large enough that a body left in the pool queue is not nothing. */
const BODY = 'x'.repeat(100_000);

interface Stats {
  inFlight: number;
  calls: Record<string, number>;
  cancelled: string[];
}

let python: PythonUpstream;
let running: RoutedGateway;
const opened: RawRpc[] = [];

beforeAll(async () => {
  python = await startPythonUpstream();
  running = await startRoutedGateway(
    {
      // One socket: a call that hangs holds it, and every later request waits in the pool queue.
      upstreams: {
        single: {
          url: python.url,
          maxConcurrent: MAX_CONCURRENT,
          // One session takes the whole bound here: its share is the upstream's.
          maxConcurrentPerSession: MAX_CONCURRENT,
          timeoutMs: 60_000,
        },
      },
      methods: {
        'single.*': 'single',
        'brief.*': { upstream: 'single', timeoutMs: 200 },
      },
    },
    // The slots are read from /metrics in a polling loop: every scrape renders, none refused.
    {
      limits: { maxMessageBytes: 1024 * 1024, metricsCacheMs: 0, probeRequestsPerSecondPerIp: 0 },
    },
    withOneSocket,
  );
});

/** The configuration as resolved, its upstream's pool given the one socket a file cannot give. */
function withOneSocket(config: unknown): UpstreamsConfig {
  const resolved = resolveUpstreamsConfig(config);
  const single = resolved.upstreams.get('single') as HttpUpstreamConfig;
  return { ...resolved, upstreams: new Map([['single', { ...single, connections: 1 }]]) };
}

afterEach(() => closeAll());

/** Close every socket a test opened; each test or run starts from no session and no slot held. */
async function closeAll(): Promise<void> {
  for (const rpc of opened.splice(0)) rpc.socket.terminate();
  await waitFor(() => running.gateway.sessions.size === 0, 'the sessions to close');
  await waitFor(async () => ((await inFlight()) ?? 0) === 0, 'every slot to be free');
}

afterAll(async () => {
  await running?.close();
  await python?.stop();
});

const stats = () => python.rpc('test.stats') as Promise<Stats>;

async function inFlight(): Promise<number | undefined> {
  return sampleValue(await scrape(running.httpUrl), 'wsrpc_upstream_in_flight', {
    upstream: 'single',
  });
}

async function open(user = 'alice'): Promise<RawRpc> {
  const rpc = await RawRpc.open(`${running.url}?user=${user}`);
  opened.push(rpc);
  return rpc;
}

/** A call that takes the pool's one socket until it is cancelled: resolves once Python has it. */
async function holdTheSocket(rpc: RawRpc, id: number): Promise<void> {
  await python.rpc('test.reset');
  rpc.send({ jsonrpc: '2.0', id, method: 'single.hang' });
  await waitFor(async () => (await stats()).inFlight === 1, 'the held call in Python');
}

/**
 * Send a call and, once the endpoint has it (it takes a slot, or is refused one), cancel it; its
 * answer. Cancelled before its handler runs, a call would never reach the endpoint at all.
 */
async function callAndCancel(rpc: RawRpc, id: number): Promise<WireFrame> {
  await callTaken(rpc, id, 'single.get');
  rpc.send({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id } });
  return rpc.response(id);
}

/** Send a call; resolves once the endpoint took it (answered, or holding one more slot). */
async function callTaken(rpc: RawRpc, id: number, method: string): Promise<void> {
  const before = (await inFlight()) ?? 0;
  rpc.send({ jsonrpc: '2.0', id, method, params: { body: BODY } });
  await waitFor(
    async () => rpc.frames.some((f) => f.id === id) || ((await inFlight()) ?? 0) > before,
    'the endpoint to take the call',
  );
}

/** -32013 from the upstream; with `bound`, refused at that bound (its option's name). */
function expectBusy(frame: WireFrame, bound?: string): void {
  expect(frame.error?.code).toBe(-32013);
  const data = frame.error?.data as
    { upstream?: string; bound?: string; limit?: number } | undefined;
  expect(data?.upstream).toBe('single');
  if (bound !== undefined)
    expect({ bound: data?.bound, limit: data?.limit }).toEqual({ bound, limit: MAX_CONCURRENT });
}

/** Cancel the held call; once its socket frees, every slot frees and calls go through again. */
async function releaseAndCheck(rpc: RawRpc, heldId: number): Promise<void> {
  rpc.send({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id: heldId } });
  expect((await rpc.response(heldId)).error?.code).toBe(-32001);
  await waitFor(async () => (await inFlight()) === 0, 'the queued requests to be let go');
  // The requests given up while queued were dropped unsent: Python saw none of them.
  expect((await stats()).calls['orders.get']).toBeUndefined();
  const after = await open();
  for (let i = 1; i <= MAX_CONCURRENT + 1; i++) {
    const answer = await after.request('single.get', { i });
    expect((answer.result as { params: unknown }).params).toEqual({ i });
  }
}

describe('a request given up while it waits in the pool queue', () => {
  it('keeps its slot after rpc.cancel: one past maxConcurrent is refused -32013', async () => {
    const rpc = await open();
    await holdTheSocket(rpc, 1);
    const answers: WireFrame[] = [];
    // The held call has one slot; MAX_CONCURRENT - 1 cancelled ones fill the rest, one more is refused.
    for (let id = 2; id <= MAX_CONCURRENT + 1; id++) answers.push(await callAndCancel(rpc, id));
    for (const answer of answers.slice(0, -1)) expect(answer.error?.code).toBe(-32001);
    expectBusy(answers.at(-1)!);
    expect(await inFlight()).toBe(MAX_CONCURRENT);
    await releaseAndCheck(rpc, 1);
  });

  it("keeps its slot after the client's disconnect", async () => {
    const holder = await open();
    await holdTheSocket(holder, 1);
    const leaving: RawRpc[] = [];
    for (let i = 1; i < MAX_CONCURRENT; i++) leaving.push(await open());
    for (const rpc of leaving) {
      rpc.send({ jsonrpc: '2.0', id: 1, method: 'single.get', params: { body: BODY } });
    }
    await waitFor(async () => (await inFlight()) === MAX_CONCURRENT, 'the calls to be queued');
    for (const rpc of leaving) rpc.socket.terminate();
    await waitFor(() => running.gateway.sessions.size === 1, 'the gateway to close their sessions');
    expectBusy(await callAndCancel(await open(), 1));
    expect(await inFlight()).toBe(MAX_CONCURRENT);
    await releaseAndCheck(holder, 1);
  });

  it('keeps its slot after the route timeout answered -32012', async () => {
    const rpc = await open();
    await holdTheSocket(rpc, 1);
    for (let id = 2; id <= MAX_CONCURRENT; id++) {
      rpc.send({ jsonrpc: '2.0', id, method: 'brief.get', params: { body: BODY } });
      const answer = await rpc.response(id);
      expect(answer.error?.code).toBe(-32012);
    }
    rpc.send({ jsonrpc: '2.0', id: 9, method: 'brief.get', params: { body: BODY } });
    expectBusy(await rpc.response(9));
    expect(await inFlight()).toBe(MAX_CONCURRENT);
    await releaseAndCheck(rpc, 1);
  });
});

type GiveUp = 'cancel' | 'disconnect' | 'timeout';

/**
 * Cancels and timeouts are the holder's calls, alice's; each disconnect is a session of a user of
 * its own. So which bound refuses a call is the model's to say: the holder's session share once
 * alice's session holds MAX_CONCURRENT, else the upstream's maxConcurrent (not a share that
 * happens to equal it, which would hide an off-by-one in the upstream's own bound).
 */
const giveUpRuns: GiveUp[][] = [
  // Every slot taken by calls given up, a disconnect among them; then a fresh user and the holder
  // (its share not full) are both refused at maxConcurrent, and the holder once its share is full.
  ['disconnect', 'cancel', 'timeout', 'disconnect', 'cancel'],
  ['cancel', 'cancel', 'timeout', 'cancel', 'disconnect'],
];

describe('calls given up while queued, against a model', () => {
  it('each holds a slot until the queue lets it go: in flight is what the model holds, busy past maxConcurrent', async () => {
    const giveUps = fc.array(fc.constantFrom<GiveUp>('cancel', 'disconnect', 'timeout'), {
      minLength: 1,
      maxLength: MAX_CONCURRENT + 2,
    });
    await fc.assert(
      fc.asyncProperty(giveUps, async (sequence) => {
        // A run starts from nothing, whatever the one before left (a failed run, while shrinking).
        await closeAll();
        const holder = await open();
        await holdTheSocket(holder, 1);
        // Slots held: all of them, and the holder's session's (alice's).
        let held = 1;
        let heldByHolder = 1;
        for (const [i, giveUp] of sequence.entries()) {
          const fromHolder = giveUp !== 'disconnect';
          const busy = held >= MAX_CONCURRENT;
          const id = i + 2;
          const rpc = fromHolder ? holder : await open(`leaver-${id}`);
          await callTaken(rpc, id, giveUp === 'timeout' ? 'brief.get' : 'single.get');
          if (busy) {
            const bound =
              fromHolder && heldByHolder >= MAX_CONCURRENT
                ? 'maxConcurrentPerSession'
                : 'maxConcurrent';
            expectBusy(await rpc.response(id), bound);
          } else if (giveUp === 'cancel') {
            rpc.send({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id } });
            expect((await rpc.response(id)).error?.code).toBe(-32001);
          } else if (giveUp === 'timeout') {
            expect((await rpc.response(id)).error?.code).toBe(-32012);
          }
          if (giveUp === 'disconnect') {
            rpc.socket.terminate();
            await waitFor(() => running.gateway.sessions.size === 1, 'its session to close');
          }
          if (!busy) {
            held++;
            if (fromHolder) heldByHolder++;
          }
          expect(await inFlight()).toBe(held);
        }
        await releaseAndCheck(holder, 1);
      }),
      { numRuns: 10, examples: giveUpRuns.map((run) => [run]) },
    );
  }, 120_000);
});
