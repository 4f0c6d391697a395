/*
 * A malformed `$presence` frame from the server (not an object, a count that is no number, a list
 * that is no list, a member with no session id) is passed over by client.presence(): nothing is
 * thrown out of the frame's handling (rxjs reports an exception thrown by an observer's `next`
 * through config.onUnhandledError, else rethrows it from a timer: an uncaught exception that ends
 * a Node process, an uncaught error on a page), and the frames after it are folded in as ever.
 * And a server listing more members than any topic lists (MAX_LISTED) grows no list past it.
 */
import { config } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { FakeGateways, framesOf, note, reply } from '../support/fake-gateway.js';
import { MAX_LISTED } from '../../src/client/presence.js';
import type { PresenceState } from '../../src/client/presence.js';
import { waitFor } from '../support/waiting.js';

const gateways = new FakeGateways();
const unhandled: unknown[] = [];
const before = config.onUnhandledError;
config.onUnhandledError = (err) => unhandled.push(err);
afterEach(async () => {
  await gateways.cleanup();
});

describe('client.presence against a hostile server', () => {
  for (const [what, bad] of [
    ['members that is not a list', { count: 1, members: 5 }],
    ['a joined member that is null', { count: 1, joined: [null] }],
    ['a frame whose data is null', null],
    ['a count that is no number', { count: 'many', members: [] }],
  ] as const) {
    it(`${what}: nothing is thrown out of the frame's handling`, async () => {
      const gw = await gateways.listen((socket) => {
        socket.on('message', (data) => {
          for (const frame of framesOf(data)) {
            if (frame.method !== 'subscribe') continue;
            reply(socket, frame.id, 'p1');
            note(socket, { subscription: 'p1', result: bad });
            note(socket, {
              subscription: 'p1',
              result: { count: 1, members: [{ sessionId: 's1' }] },
            });
          }
        });
      });
      const client = gateways.client({ url: gw.url });
      const states: PresenceState[] = [];
      gateways.subscriptions.push(client.presence('room').subscribe((s) => states.push(s)));
      await waitFor(() => states.some((s) => s.members.length === 1), 'the good frame');
      // rxjs schedules its report with setTimeout(0) when the bad frame was read, before the
      // good frame arrived: one more timer turn lets it run.
      await new Promise((resolve) => setTimeout(resolve, 0));
      expect(unhandled.map(String)).toEqual([]);
      // The good frame after it made the list; no state lists anything but members.
      expect(states.at(-1)).toEqual({ count: 1, members: [{ sessionId: 's1' }] });
      for (const state of states) {
        expect(state.members.every((m) => typeof m.sessionId === 'string')).toBe(true);
      }
    });
  }
});

describe('client.presence against a server listing without end', () => {
  it(`lists at most MAX_LISTED (${MAX_LISTED}) members; past it a join changes the count alone`, async () => {
    const many = (from: number, n: number) =>
      Array.from({ length: n }, (_, i) => ({ sessionId: `s${from + i}` }));
    const gw = await gateways.listen((socket) => {
      socket.on('message', (data) => {
        for (const frame of framesOf(data)) {
          if (frame.method !== 'subscribe') continue;
          reply(socket, frame.id, 'p1');
          // A first page past the bound, then joins past it, a leave, and a join in its room.
          note(socket, { subscription: 'p1', result: { count: 1500, members: many(0, 1500) } });
          note(socket, { subscription: 'p1', result: { count: 3500, joined: many(1500, 2000) } });
          note(socket, {
            subscription: 'p1',
            result: { count: 3499, left: [{ sessionId: 's0' }] },
          });
          note(socket, { subscription: 'p1', result: { count: 3500, joined: many(5000, 1) } });
        }
      });
    });
    const client = gateways.client({ url: gw.url });
    const states: PresenceState[] = [];
    gateways.subscriptions.push(client.presence('room').subscribe((s) => states.push(s)));
    await waitFor(() => states.length === 4, 'the four frames');
    expect(states.map((s) => [s.count, s.members.length])).toEqual([
      [1500, MAX_LISTED],
      [3500, MAX_LISTED],
      [3499, MAX_LISTED - 1],
      [3500, MAX_LISTED],
    ]);
    expect(states[3]!.members.at(-1)).toEqual({ sessionId: 's5000' });
  });
});

afterEach(() => {
  unhandled.length = 0;
});
afterAll(() => {
  config.onUnhandledError = before;
});
