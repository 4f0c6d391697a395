// A call with `retries` holds one transport request to its upstream at a time: a retry starts
// only once the transport has let go of the attempt before it (answered, failed, or aborted
// for real), so the requests an upstream's pool holds stay within maxConcurrent, retries
// included. Counted twice: by the HTTP transport (the requests it holds, a request waiting for
// a pool socket included) and by a real upstream in this process (the requests it is serving:
// until answered or their socket closes).
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { JsonRpcHttpClient, UpstreamEndpoint, UpstreamError } from '../../src/upstream/index.js';
import type { UpstreamFailure } from '../../src/upstream/index.js';
import type { UpstreamRequest } from '../../src/upstream/upstream-endpoint.js';
import { listenOnLoopback } from '../support/network.js';
import { rejectionOf } from '../support/promises.js';
import { waitFor } from '../support/waiting.js';

/** How many requests are open at once, in all and per call (the call's X-Request-Id). */
class Concurrency {
  private readonly open = new Map<unknown, string>();
  maxTotal = 0;
  private readonly maxOf = new Map<string, number>();

  get total(): number {
    return this.open.size;
  }

  /** The most requests of the call `requestId` open at once. */
  maxPerCall(requestId: string): number {
    return this.maxOf.get(requestId) ?? 0;
  }

  /** The most requests of any one call open at once. */
  get maxOfAnyCall(): number {
    return Math.max(0, ...this.maxOf.values());
  }

  opened(request: unknown, requestId: string): void {
    this.open.set(request, requestId);
    this.maxTotal = Math.max(this.maxTotal, this.open.size);
    let ofCall = 0;
    for (const id of this.open.values()) if (id === requestId) ofCall++;
    this.maxOf.set(requestId, Math.max(this.maxPerCall(requestId), ofCall));
  }

  closed(request: unknown): void {
    this.open.delete(request);
  }

  reset(): void {
    this.maxTotal = this.open.size;
    this.maxOf.clear();
  }
}

/**
 * The HTTP transport, counting the requests it holds: from `attempt` (the request handed to the
 * pool, where it may wait for a socket) until the transport settles it.
 */
class CountedHttpClient extends JsonRpcHttpClient {
  readonly held = new Concurrency();

  protected override attempt(request: UpstreamRequest): Promise<unknown> {
    const requestId = request.headers['x-request-id'] ?? '';
    this.held.opened(request, requestId);
    return super.attempt(request).finally(() => this.held.closed(request));
  }
}

/**
 * A JSON-RPC upstream that counts the requests it is serving: `hold` is never answered (served
 * until the gateway closes its socket), anything else is answered at once.
 */
async function startCountingUpstream(): Promise<{
  url: string;
  concurrency: Concurrency;
  /** Requests received, by X-Request-Id. */
  received: Map<string, number>;
  stop(): Promise<void>;
}> {
  const concurrency = new Concurrency();
  const received = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    const requestId = String(req.headers['x-request-id']);
    received.set(requestId, (received.get(requestId) ?? 0) + 1);
    concurrency.opened(res, requestId);
    res.on('close', () => concurrency.closed(res));
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const message = JSON.parse(body) as { id: number; method: string };
      if (message.method === 'hold') return;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result: message.method }));
    });
  });
  const { port, close } = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}/rpc`,
    concurrency,
    received,
    stop: close,
  };
}

const MAX_CONCURRENT = 2;
const RETRIES = 2;

let upstream: Awaited<ReturnType<typeof startCountingUpstream>>;
let endpoints: CountedHttpClient[] = [];

beforeAll(async () => {
  upstream = await startCountingUpstream();
});

afterEach(async () => {
  await Promise.all(endpoints.map((endpoint) => endpoint.close()));
  endpoints = [];
  await waitFor(() => upstream.concurrency.total === 0, 'the upstream to be idle');
  upstream.concurrency.reset();
});

afterAll(async () => {
  await upstream?.stop();
});

function endpoint(connections: number): CountedHttpClient {
  const made = new CountedHttpClient({
    name: 'counted',
    url: upstream.url,
    maxConcurrent: MAX_CONCURRENT,
    retries: RETRIES,
    connections,
    maxReplyBytes: 64 * 1024,
  });
  endpoints.push(made);
  return made;
}

describe('an idempotent call whose attempts time out', () => {
  it('holds one pool request at a time while its attempts wait for a socket: the pool stays within maxConcurrent', async () => {
    // One socket, which a call that is never answered holds: every other request waits for it.
    const counted = endpoint(1);
    const holding = new AbortController();
    const held = rejectionOf(
      counted.call('hold', undefined, {
        timeoutMs: 60_000,
        signal: holding.signal,
        headers: { 'x-request-id': 'holder' },
      }),
    );
    await waitFor(() => upstream.concurrency.total === 1, 'the upstream to serve the holder');

    const failure = await rejectionOf(
      counted.call('get', undefined, {
        timeoutMs: 100,
        idempotent: true,
        headers: { 'x-request-id': 'queued' },
      }),
    );
    expect(failure).toBeInstanceOf(UpstreamError);
    expect((failure as UpstreamError).failure).toBe('timeout');
    expect(counted.held.maxPerCall('queued')).toBe(1);
    expect(counted.held.maxTotal).toBeLessThanOrEqual(MAX_CONCURRENT);

    holding.abort(new Error('released'));
    await held;
    await waitFor(() => counted.inFlight === 0, 'every slot to be let go');
    expect(counted.held.total).toBe(0);
    // The attempts given up while queued were dropped unsent.
    expect(upstream.received.get('queued')).toBeUndefined();
  });

  it('against an upstream slower than the timeout: one request of the call at a time, each attempt sent', async () => {
    const counted = endpoint(4);
    const failure = await rejectionOf(
      counted.call('hold', undefined, {
        timeoutMs: 100,
        idempotent: true,
        headers: { 'x-request-id': 'slow' },
      }),
    );
    expect((failure as UpstreamError).failure).toBe('timeout');
    expect(upstream.received.get('slow')).toBe(RETRIES + 1);
    expect(counted.held.maxPerCall('slow')).toBe(1);
    expect(upstream.concurrency.maxPerCall('slow')).toBe(1);
    expect(counted.inFlight).toBe(0);
  });
});

/**
 * What one attempt's transport does: answers (`ok`), fails at once (`unsent`: never left;
 * `failed`: left, then cut; `busy`), or gives no answer until aborted and then lets go at once
 * (`timeout`), a turn later (`lingering`), or only when the test says, after every call has its
 * answer (`stuck`: a transport that ignores the abort).
 */
type Outcome = 'ok' | 'unsent' | 'failed' | 'busy' | 'timeout' | 'lingering' | 'stuck';

/** A transport that does what each call's script says, attempt by attempt, counting what it holds. */
class ScriptedEndpoint extends UpstreamEndpoint {
  protected override readonly keepsAbortedRequests: boolean;
  readonly held = new Concurrency();
  /** Attempts sent, by X-Request-Id. */
  readonly sent = new Map<string, number>();
  private readonly stuck: (() => void)[] = [];
  /** Called when a `stuck` request is aborted (which it ignores). */
  onStuckAbort: (() => void) | undefined;

  constructor(
    private readonly scripts: ReadonlyMap<string, readonly Outcome[]>,
    options: { maxConcurrent: number; retries: number; keepsAbortedRequests: boolean },
  ) {
    super({ name: 'scripted', ...options });
    this.keepsAbortedRequests = options.keepsAbortedRequests;
  }

  protected attempt(request: UpstreamRequest): Promise<unknown> {
    const requestId = request.headers['x-request-id']!;
    const n = this.sent.get(requestId) ?? 0;
    this.sent.set(requestId, n + 1);
    this.held.opened(request, requestId);
    return this.transport(request, this.scripts.get(requestId)![n]!).finally(() =>
      this.held.closed(request),
    );
  }

  /** Let every `stuck` transport request go. */
  releaseStuck(): void {
    for (const release of this.stuck.splice(0)) release();
  }

  close(): Promise<void> {
    this.releaseStuck();
    return Promise.resolve();
  }

  private transport(request: UpstreamRequest, outcome: Outcome): Promise<unknown> {
    const fail = (failure: UpstreamFailure, unsent = false) =>
      Promise.reject(new UpstreamError(failure, this.name, outcome, undefined, unsent));
    switch (outcome) {
      case 'ok':
        return Promise.resolve('ok');
      case 'unsent':
        return fail('unavailable', true);
      case 'failed':
        return fail('unavailable');
      case 'busy':
        return fail('busy');
      case 'timeout':
        return new Promise((_resolve, reject) =>
          request.onAbort((reason) => reject(reason as Error)),
        );
      case 'lingering':
        return new Promise((_resolve, reject) =>
          request.onAbort((reason) => setImmediate(() => reject(reason as Error))),
        );
      case 'stuck':
        request.onAbort(() => this.onStuckAbort?.());
        return new Promise((resolve) => this.stuck.push(() => resolve('too late')));
    }
  }
}

interface ScriptedCall {
  script: Outcome[];
  idempotent: boolean;
}

/** The model: the call's answer (`ok` or its failure) and how many attempts it sends. */
function expected(call: ScriptedCall, retries: number): { answer: string; attempts: number } {
  for (let i = 0; ; i++) {
    const outcome = call.script[i]!;
    if (outcome === 'ok') return { answer: 'ok', attempts: i + 1 };
    if (outcome === 'busy') return { answer: 'busy', attempts: i + 1 };
    const answer = outcome === 'unsent' || outcome === 'failed' ? 'unavailable' : 'timeout';
    const safe = outcome === 'unsent' || call.idempotent;
    // A transport still holding the attempt when its wait ends: the call ends, never a second request.
    if (!safe || i === retries || outcome === 'stuck') return { answer, attempts: i + 1 };
  }
}

describe('retries against a model of per-attempt outcomes', () => {
  it('a call never holds two transport requests, the transport never more than maxConcurrent calls, and every call is answered as the model says', async () => {
    const maxConcurrent = 3;
    const outcome = fc.constantFrom<Outcome>(
      'ok',
      'unsent',
      'failed',
      'busy',
      'timeout',
      'lingering',
      'stuck',
    );
    const run = fc.record({
      retries: fc.integer({ min: 0, max: 3 }),
      keepsAbortedRequests: fc.boolean(),
      calls: fc.array(
        fc.record({
          script: fc.array(outcome, { minLength: 4, maxLength: 4 }),
          idempotent: fc.boolean(),
        }),
        { minLength: 1, maxLength: maxConcurrent + 2 },
      ),
    });
    await fc.assert(
      fc.asyncProperty(run, async ({ retries, keepsAbortedRequests, calls }) => {
        const scripts = new Map(calls.map((call, i) => [`call-${i}`, call.script]));
        const endpoint = new ScriptedEndpoint(scripts, {
          maxConcurrent,
          retries,
          keepsAbortedRequests,
        });
        try {
          // All sent in one turn: the first maxConcurrent take the slots, the rest are refused.
          const answers = await Promise.all(
            calls.map((call, i) =>
              endpoint
                .call('m', undefined, {
                  timeoutMs: 5,
                  idempotent: call.idempotent,
                  headers: { 'x-request-id': `call-${i}` },
                })
                .then(
                  () => 'ok',
                  (err: unknown) => (err instanceof UpstreamError ? err.failure : String(err)),
                ),
            ),
          );
          calls.forEach((call, i) => {
            const model =
              i < maxConcurrent ? expected(call, retries) : { answer: 'busy', attempts: 0 };
            expect(answers[i]).toBe(model.answer);
            expect(endpoint.sent.get(`call-${i}`) ?? 0).toBe(model.attempts);
          });
          expect(endpoint.held.maxOfAnyCall).toBeLessThanOrEqual(1);
          // A transport that keeps aborted requests has its calls keep their slots meanwhile.
          if (keepsAbortedRequests)
            expect(endpoint.held.maxTotal).toBeLessThanOrEqual(maxConcurrent);
          endpoint.releaseStuck();
          // Every call's slot and every transport request let go: nothing is held for ever.
          await waitFor(
            () => endpoint.inFlight === 0 && endpoint.held.total === 0,
            'every slot and transport request to be let go',
          );
        } finally {
          await endpoint.close();
        }
      }),
      { numRuns: 60 },
    );
  }, 60_000);
});

describe('a retry waiting for a transport that ignores the abort', () => {
  it("ends at once on the caller's cancel, the call keeping its slot until the transport lets go", async () => {
    const endpoint = new ScriptedEndpoint(new Map([['waiting', ['stuck', 'ok'] as Outcome[]]]), {
      maxConcurrent: 1,
      retries: 1,
      keepsAbortedRequests: true,
    });
    const caller = new AbortController();
    const cancel = new Error('cancelled by the caller');
    // A turn after the attempt's timeout: the call is then waiting for the transport to let go.
    endpoint.onStuckAbort = () => setImmediate(() => caller.abort(cancel));
    const failure = await rejectionOf(
      endpoint.call('m', undefined, {
        // The wait's own bound (one more timeoutMs) is far off when the cancel comes.
        timeoutMs: 100,
        idempotent: true,
        signal: caller.signal,
        headers: { 'x-request-id': 'waiting' },
      }),
    );
    expect(failure).toBe(cancel);
    expect(endpoint.sent.get('waiting')).toBe(1);
    expect(endpoint.held.total).toBe(1);
    expect(endpoint.inFlight).toBe(1);
    endpoint.releaseStuck();
    await waitFor(() => endpoint.inFlight === 0, 'the slot to be let go');
  });
});
