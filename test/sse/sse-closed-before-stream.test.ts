/**
 * A session closed before its event stream came (an observer of `connected$` that closes it, as
 * an application refusing a banned user does, in the same turn as the opening GET) still answers
 * that GET: 200 with just the close event, its code and reason, and the response ended. Left
 * open, the GET would hold its socket outside every bound (taken out of the HTTP socket bounds
 * as a stream, its session gone), and its client would never learn why.
 */
import { afterEach, expect, it } from 'vitest';
import { startGateway } from '../support/gateway.js';
import { waitFor } from '../support/waiting.js';
import { openStream } from './sse-raw.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it('a session closed by a connected$ observer answers its opening GET with the close event, and ends it', async () => {
  const running = await startGateway({ routes: { events: '/rpc/events' } });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  const { gateway } = running;
  const subscription = gateway.connected$.subscribe((session) => session.close(4003, 'banned'));
  cleanups.push(() => subscription.unsubscribe());
  const events = `http://127.0.0.1:${running.port}/rpc/events`;
  for (let i = 0; i < 3; i++) {
    const stream = await openStream(events);
    cleanups.push(() => stream.destroy());
    expect(stream.status).toBe(200);
    await stream.ended;
    expect(stream.events.map((e) => [e.event, JSON.parse(e.data) as unknown])).toEqual([
      ['close', { code: 4003, reason: 'banned' }],
    ]);
  }
  await waitFor(() => gateway.sessions.size === 0, 'the sessions gone');
});
