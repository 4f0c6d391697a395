/**
 * A POST exchange whose notification handler outlives its 204 holds its admission slot until the
 * handler settles, and is let go when it does: waited on, not polled for, so thousands of them
 * held cost no timer wakes. Timers are faked from before the POST: the release must come with
 * none of them run.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Admission } from '../../src/server/admission.js';
import type { Gateway } from '../../src/server/gateway.js';
import { deferred } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { postRpc } from './http-post.js';

const res = new Resources();
afterEach(async () => {
  vi.useRealTimers();
  await res.cleanup();
});

function admissionOf(gateway: Gateway): Admission {
  return (gateway as unknown as { admission: Admission }).admission;
}

/** Turns of the event loop (setImmediate, not faked) until `holds`, at most `turns` of them. */
async function turnsUntil(holds: () => boolean, turns = 200): Promise<boolean> {
  for (let turn = 0; turn < turns && !holds(); turn++) {
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return holds();
}

describe('a POST notification whose handler outlives its 204', () => {
  it('keeps its slot until the handler settles, then releases it with no timer run', async () => {
    const { gateway, httpUrl } = await res.gateway();
    const started = deferred();
    const handler = deferred();
    gateway.method('later', () => {
      started.resolve();
      return handler.promise;
    });
    const admission = admissionOf(gateway);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });

    const answer = await postRpc(`${httpUrl}/rpc`, { method: 'later' });
    expect(answer.status).toBe(204);
    await started.promise;
    expect(await turnsUntil(() => admission.connections === 0, 20)).toBe(false);

    handler.resolve();
    expect(await turnsUntil(() => admission.connections === 0)).toBe(true);
  });
});
