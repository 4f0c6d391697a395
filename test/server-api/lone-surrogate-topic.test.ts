/**
 * A topic name with a lone surrogate has no UTF-8 form (sent, it would be its U+FFFD twin's):
 * every server API method that takes a topic answers it -32602 naming the field, as it does any
 * other bad name, not -32603 with an error logged.
 */
import { afterEach, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type { ServerApi } from '../../src/server-api/index.js';
import { Resources } from '../support/resources.js';
import { call, post, startApi } from './support.js';

const res = new Resources();
const apis: ServerApi[] = [];

afterEach(async () => {
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
});

const lone = 'priv.\ud800';

it.each([
  ['publish', { topic: lone, data: 1 }, 'topic'],
  ['publish', { topic: lone, data: 1, idempotencyKey: 'k1' }, 'topic'],
  ['broadcast', { topics: ['ok', lone], data: 1 }, 'topics[1]'],
  ['history', { topic: lone }, 'topic'],
  ['subscribers', { topic: lone }, 'topic'],
  ['members', { topic: lone }, 'topic'],
])(
  '%s with a lone surrogate in the topic: -32602 naming the field',
  async (method, params, field) => {
    const { gateway } = await res.gateway();
    gateway.topic('*');
    gateway.topic('priv.*');
    const api = await startApi(gateway);
    apis.push(api);
    const answer = await post(api.url, method, params);
    expect(answer.body).toMatchObject({
      error: { code: ErrorCode.InvalidParams, data: { field } },
    });
    // Nothing was published under the twin name either.
    expect(await call(api.url, 'history', { topic: 'priv.\ufffd' })).toMatchObject({
      messages: [],
    });
  },
);
