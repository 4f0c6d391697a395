/**
 * fallbackSocket's move back to WebSocket, with calls out on the event stream: the stream is
 * left as a draining server's connection is, so the calls in flight are answered there (their
 * server handlers run to the end) rather than rejected and aborted; calls made meanwhile go over
 * the WebSocket, server-to-client calls and subscription messages on the stream are handled, and
 * the subscription goes on over the WebSocket with nothing lost or twice.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { kinds, moveUpSetUp, outcome } from './move-up.js';
import { waitUntil, within } from '../support/waiting.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('fallbackSocket: the move back to WebSocket with calls in flight', () => {
  it('answers the calls out on the event stream; none is rejected or aborted', async () => {
    const { gateway, rpc, held, blockable } = await moveUpSetUp(cleanups);
    expect(kinds(gateway)).toEqual(['sse']);
    const calls = [1, 2, 3].map(() => outcome(rpc.call('held')));
    await waitUntil(() => held.length === 3, 'three calls on the server');
    blockable.unblock();
    await waitUntil(() => blockable.opened >= 1, 'a WebSocket open');
    const later = outcome(rpc.call('add', [2, 3]));
    held.forEach((entry, i) => entry.answer.resolve(`answer ${i + 1}`));
    expect(await within(Promise.all(calls), 'the three answers')).toEqual([
      'resolved answer 1',
      'resolved answer 2',
      'resolved answer 3',
    ]);
    expect(held.map((entry) => entry.aborted)).toEqual([false, false, false]);
    expect(await within(later, 'the call made during the move')).toBe('resolved 5');
    await waitUntil(() => kinds(gateway).join() === 'websocket', 'the move to WebSocket');
    expect(await rpc.call('ask')).toBe('moving');
  });

  it('handles what arrives on the stream meanwhile; the subscription goes on, each message once', async () => {
    const { gateway, rpc, held, blockable } = await moveUpSetUp(cleanups);
    const seen: number[] = [];
    const subscription = rpc.subscribe<number>('feed').subscribe((n) => seen.push(n));
    cleanups.push(() => subscription.unsubscribe());
    await waitUntil(async () => {
      await gateway.publish('feed', 0);
      return seen.length > 0;
    }, 'the first message');
    const call = outcome(rpc.call('held'));
    await waitUntil(() => held.length === 1, 'the call on the server');
    blockable.unblock();
    await waitUntil(() => blockable.opened >= 1, 'a WebSocket open');
    const stream = [...gateway.sessions.values()].find((s) => s.transport.kind === 'sse')!;
    // On the stream while its call is out: a server-to-client call and messages.
    expect(await stream.call('client.name', [])).toBe('moving');
    for (let n = 1; n <= 3; n++) await gateway.publish('feed', n);
    await waitUntil(() => seen.at(-1) === 3, 'three messages');
    held[0]!.answer.resolve('done');
    expect(await within(call, 'the answer')).toBe('resolved done');
    await waitUntil(() => kinds(gateway).join() === 'websocket', 'the move to WebSocket');
    for (let n = 4; n <= 6; n++) await gateway.publish('feed', n);
    await waitUntil(() => seen.at(-1) === 6, 'three more messages');
    expect(seen.filter((n) => n > 0)).toEqual([1, 2, 3, 4, 5, 6]);
  });
});
