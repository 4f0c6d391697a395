/**
 * An HTTP POST exchange still running when the gateway's shutdown ends it (its drain timeout
 * passed) is answered 503 with Retry-After, as a POST arriving while the gateway drains is:
 * its call was not answered, so never the 204 that says a notification was accepted. Its
 * handler sees ctx.signal abort.
 */
import { afterEach, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { waitUntil, within } from '../support/waiting.js';
import { postRpc } from './http-post.js';

const res = new Resources();
afterEach(() => res.cleanup());

it('a call cut by the shutdown is answered 503 with Retry-After, and its handler aborted', async () => {
  const { gateway, httpUrl } = await res.gateway();
  let started = false;
  let aborted = false;
  gateway.method('slow.wait', (_params, ctx) => {
    started = true;
    return new Promise((_resolve, reject) => {
      ctx.signal.addEventListener('abort', () => {
        aborted = true;
        reject(new Error('aborted'));
      });
    });
  });
  const answer = postRpc(`${httpUrl}/rpc`, { id: 1, method: 'slow.wait' });
  await waitUntil(() => started, 'the call to run');
  await gateway.close({ timeoutMs: 1 });
  const { status, retryAfter, body } = await within(answer, 'the answer');
  expect({ status, retryAfter, body }).toEqual({
    status: 503,
    retryAfter: '1',
    body: 'Server shutting down\n',
  });
  expect(aborted).toBe(true);
});
