/**
 * A call waiting on an async `authorize` hook whose connection closes meanwhile is over: when
 * the hook then allows it, its handler does not run (its answer could not be sent, and the
 * session it would act for is gone), as a notification waiting on the hook is not delivered.
 */
import { afterEach, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { Resources } from '../support/resources.js';
import { deferred } from '../support/promises.js';
import { waitUntil, within } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

it('a call whose connection closed while authorize decided is not run when it is allowed', async () => {
  const verdicts: ReturnType<typeof deferred<boolean>>[] = [];
  const { url, gateway } = await res.gateway({
    heartbeatIntervalMs: 0,
    authorize: () => {
      const verdict = deferred<boolean>();
      verdicts.push(verdict);
      return verdict.promise;
    },
  });
  const ran: string[] = [];
  gateway.method('act', () => void ran.push('call'));
  const socket = res.track(new WebSocket(url));
  await new Promise((resolve) => socket.once('open', resolve));
  await waitUntil(() => gateway.sessions.size === 1, 'the session');
  const session = [...gateway.sessions.values()][0]!;
  socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'act' }));
  socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'act' }));
  await waitUntil(() => verdicts.length === 2, 'the hook asked about both');
  socket.close();
  await within(session.closed, 'the session closed');
  for (const verdict of verdicts) verdict.resolve(true);
  // The verdicts' callbacks run before the next turn's.
  await new Promise((resolve) => setImmediate(resolve));
  expect(ran).toEqual([]);
});
