/*
 * A call whose frame the gateway refuses unread (-32600, id null: more JSON values than
 * `maxJsonValues`, or nested deeper than `maxDepth`) fails at once with that error, found among
 * the calls in flight by counting their frames as the gateway does, rather than wait for its
 * timeout (or for ever, with no timeout). Real gateway, real sockets.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { JsonRpcError } from '../../src/protocol/errors.js';
import { Resources } from '../support/resources.js';
import { rejectionOf, deferred } from '../support/promises.js';
import { sumGateway } from '../support/client.js';

const res = new Resources();
afterEach(() => res.cleanup());

const limits = { maxJsonValues: 100, maxDepth: 8 };

/** `n` numbers: n + 1 values with the array. */
const numbers = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

/** An array nested `levels` deep around 1. */
function nested(levels: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

async function connect() {
  const running = await sumGateway(res, { limits });
  const release = deferred<void>();
  running.gateway.method('slow', async () => {
    await release.promise;
    return 'slow done';
  });
  running.gateway.method('echo', (params) => params);
  // No timeout: without the refusal found, a refused call would wait for ever.
  const client = res.client(running.url, { callTimeoutMs: 0 });
  await client.opened();
  return { client, release };
}

describe('a call refused unread by the gateway', () => {
  it('over maxJsonValues: fails at once with -32600 and the limit; a call in flight before it is answered', async () => {
    const { client, release } = await connect();
    const slow = client.call('slow', [numbers(50)]);
    const refused = await rejectionOf(client.call('sum', numbers(200)));
    expect(refused).toBeInstanceOf(JsonRpcError);
    expect(refused).toMatchObject({
      code: ErrorCode.InvalidRequest,
      data: { maxJsonValues: 100 },
    });
    release.resolve();
    expect(await slow).toBe('slow done');
    expect(await client.call('sum', [1, 2])).toBe(3);
  });

  it('over maxDepth: fails at once with -32600 and the limit', async () => {
    const { client } = await connect();
    const refused = await rejectionOf(client.call('echo', [nested(12)]));
    expect(refused).toMatchObject({ code: ErrorCode.InvalidRequest, data: { maxDepth: 8 } });
    expect(await client.call('echo', [nested(3)])).toEqual([nested(3)]);
  });

  it('in a batch: every call and notification of the batch fails with it', async () => {
    const { client } = await connect();
    const results = await client.batch([
      { method: 'sum', params: [1, 2] },
      { method: 'note', params: [3], notification: true },
      { method: 'sum', params: numbers(200) },
    ]);
    expect(results).toHaveLength(3);
    for (const result of results) {
      expect(result.status).toBe('rejected');
      expect((result as PromiseRejectedResult).reason).toMatchObject({
        code: ErrorCode.InvalidRequest,
        data: { maxJsonValues: 100 },
      });
    }
  });

  it('calls gathered into one batch (batchCalls) fail together with the refusal of their frame', async () => {
    const running = await sumGateway(res, { limits: { ...limits, maxBatch: 2 } });
    const client = res.client(running.url, { callTimeoutMs: 0, batchCalls: 5 });
    await client.opened();
    // Each under the limit, together over it.
    const overValues = await Promise.allSettled([
      client.call('sum', numbers(60)),
      client.call('sum', numbers(60)),
    ]);
    expect(overValues).toMatchObject([
      {
        status: 'rejected',
        reason: { code: ErrorCode.InvalidRequest, data: { maxJsonValues: 100 } },
      },
      {
        status: 'rejected',
        reason: { code: ErrorCode.InvalidRequest, data: { maxJsonValues: 100 } },
      },
    ]);
    // Three gathered past the server's maxBatch of 2.
    const overBatch = await Promise.allSettled([1, 2, 3].map((n) => client.call('sum', [n, n])));
    for (const result of overBatch)
      expect(result).toMatchObject({
        status: 'rejected',
        reason: { code: ErrorCode.BatchTooLarge, data: { maxBatch: 2, received: 3 } },
      });
    expect(await client.call('sum', [1, 2])).toBe(3);
  });

  it('model: of calls sent together, exactly those over a limit fail with it, the rest are answered', async () => {
    const { client } = await connect();
    // Each call: n numbers (n + 1 values with its array, plus the params array), or nested levels.
    const callArb = fc.oneof(
      fc.record({ kind: fc.constant('values' as const), n: fc.integer({ min: 1, max: 150 }) }),
      fc.record({ kind: fc.constant('depth' as const), levels: fc.integer({ min: 1, max: 12 }) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(callArb, { minLength: 1, maxLength: 8 }), async (calls) => {
        const params = calls.map((c) =>
          c.kind === 'values' ? [numbers(c.n)] : [nested(c.levels)],
        );
        const results = await Promise.allSettled(params.map((p) => client.call('echo', p)));
        results.forEach((result, i) => {
          // Values: the envelope's object, "2.0", "echo", the params array, its contents, the id.
          const c = calls[i]!;
          const values = c.kind === 'values' ? 4 + 1 + c.n + 1 : 4 + c.levels + 1 + 1;
          // Nesting: the envelope, the params array, then the list or the nested arrays.
          const depth = c.kind === 'values' ? 3 : 2 + c.levels;
          if (depth > limits.maxDepth) {
            expect(result).toMatchObject({ status: 'rejected', reason: { data: { maxDepth: 8 } } });
          } else if (values > limits.maxJsonValues) {
            expect(result).toMatchObject({
              status: 'rejected',
              reason: { data: { maxJsonValues: 100 } },
            });
          } else {
            expect(result).toEqual({ status: 'fulfilled', value: params[i] });
          }
        });
      }),
      { numRuns: 40 },
    );
  });
});
