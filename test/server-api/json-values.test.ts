/**
 * The server API reads its HTTP bodies with the gateway's limits.maxJsonValues (default
 * 10 000), as the gateway reads its clients' frames: a body of more values is answered -32600
 * with `data: { maxJsonValues }`, id null, without being parsed, and nothing is done.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type { ServerApi } from '../../src/server-api/index.js';
import { defaultLimits } from '../../src/server/options.js';
import { Resources } from '../support/resources.js';
import { call, post, startApi } from './support.js';

const res = new Resources();
const apis: ServerApi[] = [];

afterEach(async () => {
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
});

function emptyObjects(objects: number): Record<string, never>[] {
  return Array.from({ length: objects }, () => ({}));
}

describe('server API: maxJsonValues', () => {
  it('publishes a body of exactly the default cap, and refuses one more value precisely', async () => {
    const { gateway } = await res.gateway();
    gateway.topic('news');
    const api = await startApi(gateway);
    apis.push(api);

    // The request, "2.0", 1, "publish", params, "news", the array and its objects.
    const max = defaultLimits.maxJsonValues;
    const at = await post(api.url, 'publish', { topic: 'news', data: emptyObjects(max - 7) });
    expect(at.body).toMatchObject({ result: { seq: 1 } });

    const over = await post(api.url, 'publish', { topic: 'news', data: emptyObjects(max - 6) });
    expect(over.body).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: {
        code: ErrorCode.InvalidRequest,
        message: 'Invalid Request',
        data: { maxJsonValues: max },
      },
    });
    // The refused body published nothing: the next publication is the second.
    expect(await call(api.url, 'publish', { topic: 'news', data: 'last' })).toMatchObject({
      seq: 2,
    });
  });
});
