/**
 * A drain and an event-stream session: the session is closed once what was sent to it has
 * left, never while its reply waits in the replay buffer for a stream that dropped (the
 * client's resume would then find no session, and a call that ran would be told only that the
 * connection closed). Its client resumes the stream, gets the reply, then the close (1012).
 */
import { afterEach, expect, it } from 'vitest';
import { deferred } from '../support/promises.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';
import { openStream, post, resumeHeaders } from './sse-raw.js';

const running: RunningGateway[] = [];
afterEach(async () => {
  for (const gateway of running.splice(0)) await gateway.gateway.close({ timeoutMs: 1_000 });
});

const answer = (id: number) => (e: { data: string }) => new RegExp(`"id":${id}[,}]`).test(e.data);

it("a drain waits for a dropped stream's resume before it closes the session: the reply is not lost", async () => {
  const gateway = await startGateway({ routes: { events: '/rpc/events' } });
  running.push(gateway);
  const gate = deferred();
  gateway.gateway.method('slow', async () => {
    await gate.promise;
    return 'ran';
  });
  const events = `${gateway.httpUrl}/rpc/events`;
  const stream = await openStream(events);
  const { session } = stream;
  const call = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'slow' });
  expect((await post(events, session, call)).status).toBe(202);
  await waitUntil(
    () => [...gateway.gateway.sessions.values()].some((s) => s.peer.inFlightCount === 1),
    'the call to start',
  );
  const draining = gateway.gateway.drain({ deadlineMs: 15_000 });
  await stream.until((got) => got.some((e) => e.data.includes('rpc.ping')));
  const ping = JSON.parse(stream.events.find((e) => e.data.includes('rpc.ping'))!.data) as {
    id: number;
  };
  expect(
    (await post(events, session, JSON.stringify({ jsonrpc: '2.0', result: 'pong', id: ping.id })))
      .status,
  ).toBe(202);
  const lastSeen = stream.events.at(-1)!.id!;
  // The stream drops (a network blip); the call ends while it is away.
  stream.destroy();
  gate.resolve();
  await waitUntil(
    () => [...gateway.gateway.sessions.values()].every((s) => s.peer.inFlightCount === 0),
    'the call to end',
  );
  // Several of the drain's looks at the session (every 10 ms) pass while the stream is away.
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(gateway.gateway.sessions.size).toBe(1);
  const resumed = await openStream(events, { headers: resumeHeaders(session, lastSeen) });
  expect(resumed.status).toBe(200);
  const got = await resumed.until((e) => e.some(answer(1)));
  expect(JSON.parse(got.find(answer(1))!.data)).toEqual({ jsonrpc: '2.0', result: 'ran', id: 1 });
  await draining;
  await resumed.until((e) => e.some((event) => event.event === 'close'));
  expect(resumed.events.find((e) => e.event === 'close')!.data).toContain('1012');
});
