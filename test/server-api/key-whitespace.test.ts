/**
 * A serverApi key containing whitespace is refused when the configuration is resolved, with a
 * message naming serverApi.keys[i] and never the key itself: a Bearer token is read as `\S+`,
 * so such a key could never authenticate (every request would be 401).
 */
import { afterEach, expect, it } from 'vitest';
import type { ServerApi } from '../../src/server-api/index.js';
import { Resources } from '../support/resources.js';
import { startApi } from './support.js';

const res = new Resources();
const apis: ServerApi[] = [];
afterEach(async () => {
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
});

it('a key with a space: refused at start, or usable', async () => {
  const key = 'correct horse battery staple';
  const { gateway } = await res.gateway();
  let api: (ServerApi & { url: string }) | undefined;
  try {
    api = await startApi(gateway, { keys: [key] });
  } catch (err) {
    expect(String(err)).toContain('keys[0]');
    expect(String(err)).not.toContain(key);
    return;
  }
  apis.push(api);
  const response = await fetch(api.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'subscribers', params: { topic: 'a' } }),
  });
  await response.text();
  expect(response.status).toBe(200);
});

it('names the key by its path, never its value', async () => {
  const { resolveServerApiConfig } = await import('../../src/server-api/config.js');
  const key = 'a-long-enough-key\tand-a-tab';
  let message = '';
  try {
    resolveServerApiConfig({ path: '/api', keys: ['0123456789abcdef', key] });
  } catch (err) {
    message = String(err);
  }
  expect(message).toContain('serverApi.keys[1]');
  expect(message).toContain('whitespace');
  expect(message).not.toContain(key);
});
