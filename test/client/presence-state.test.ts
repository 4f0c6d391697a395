/**
 * client.presence(topic)'s fold of the `$presence` frames: one entry per session, whatever the
 * order the first page and the events come in.
 */
import { Subject, lastValueFrom, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { PRESENCE_SUBSCRIPTION, presenceState } from '../../src/client/presence.js';
import type { PresenceState } from '../../src/client/presence.js';

const you = { sessionId: 's-you', user: 'you' };
const guest = { sessionId: 's-guest', user: 'guest', info: { name: 'Guest 1' } };

/** The states folded from `frames`, as presenceState emits them. */
async function fold(frames: unknown[]): Promise<PresenceState[]> {
  const source = new Subject<unknown>();
  let asked: unknown[] = [];
  const states = lastValueFrom(
    presenceState((name, params) => {
      asked = [name, params];
      return source;
    }, 'chat').pipe(toArray()),
  );
  for (const frame of frames) source.next(frame);
  source.complete();
  const result = await states;
  expect(asked).toEqual([PRESENCE_SUBSCRIPTION, { topic: 'chat' }]);
  return result;
}

describe('client.presence(topic) state', () => {
  it('lists a member once when its join event comes after a first page that lists it', async () => {
    const states = await fold([
      { count: 2, members: [you, guest] },
      { joined: [guest, you], left: [], count: 2 },
    ]);
    expect(states.at(-1)).toEqual({ count: 2, members: [you, guest] });
  });

  it('replaces a listed member on its join, removes it on its leave', async () => {
    const renamed = { ...guest, info: { name: 'Guest 2' } };
    const states = await fold([
      { count: 1, members: [guest] },
      { joined: [renamed], left: [], count: 1 },
      { joined: [you], left: [guest], count: 1 },
      { joined: [], left: [{ sessionId: 'not-listed' }], count: 1 },
    ]);
    expect(states.map((s) => s.members)).toEqual([[guest], [renamed], [you], [you]]);
  });

  it('starts over at a first page (a resubscription after a reconnect)', async () => {
    const states = await fold([
      { count: 2, members: [you, guest] },
      { count: 1, members: [guest] },
    ]);
    expect(states.at(-1)).toEqual({ count: 1, members: [guest] });
  });
});
