import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, JsonRpcError } from '../../src/index.js';
import { Resources } from '../support/resources.js';

import { sumGateway } from '../support/client.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('client.batch beyond the server’s maxBatch', () => {
  it('rejects every member with the -32002 the server answered, at once', async () => {
    const { url } = await sumGateway(res, { limits: { maxBatch: 2 } });
    // Without the fix the members would wait for this timeout instead.
    const client = res.client(url, { callTimeoutMs: 5_000 });
    await client.opened();

    const tooLong = client.batch([
      { method: 'sum', params: [1] },
      { method: 'note', params: [1], notification: true },
      { method: 'sum', params: [2] },
    ]);
    const fits = client.batch([
      { method: 'sum', params: [3] },
      { method: 'sum', params: [4] },
    ]);
    const settled = await tooLong;
    // The notification was refused with the rest: it was not delivered either.
    expect(settled.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const result of settled) {
      const reason = (result as PromiseRejectedResult).reason as unknown;
      expect(reason).toBeInstanceOf(JsonRpcError);
      expect(reason).toMatchObject({
        code: ErrorCode.BatchTooLarge,
        data: { maxBatch: 2, received: 3 },
      });
    }
    expect(await fits).toEqual([
      { status: 'fulfilled', value: 3 },
      { status: 'fulfilled', value: 4 },
    ]);
    // The connection is fine afterwards.
    expect(await client.call('sum', [5, 6])).toBe(11);
  });
});
