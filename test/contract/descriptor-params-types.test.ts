/**
 * The params argument of a call, notification or subscribe made with a descriptor follows the
 * descriptor's params type: left out when the method takes none (`call(Ping)`), required when it
 * takes some, on the client, the shared client, a peer, a session and the React hooks alike.
 */
import { describe, expect, it } from 'vitest';
import { typeErrors } from './type-errors.js';

const declarations = `
import { method, notification, subscription } from '../../src/index.js';
import type { RpcClient, Session } from '../../src/index.js';
import type { SharedRpcClient } from '../../src/client/shared/index.js';
import { useCall } from '../../src/react/use-call.js';
import { useSubscription } from '../../src/react/use-subscription.js';
const Ping = method<undefined, string>('ping');
const Add = method<[number, number], number>('add');
const Poke = notification<undefined>('poke');
const Say = notification<{ text: string }>('say');
const Feed = subscription<undefined, string>('feed');
const Room = subscription<{ room: string }, string>('room');
declare const client: RpcClient;
declare const shared: SharedRpcClient;
declare const session: Session;
`;

describe('descriptor params in the types', () => {
  it('may be left out for a method, notification or subscription that takes none', () => {
    const errors = typeErrors(`${declarations}
export const a: Promise<string> = client.call(Ping);
export const b: Promise<string> = client.call(Ping, undefined, { timeoutMs: 5 });
export const c: Promise<string> = session.call(Ping);
export const d: Promise<string> = shared.call(Ping);
client.notify(Poke);
session.notify(Poke);
export const e = client.subscribe(Feed);
export const f = shared.subscribe(Feed);
export const g = () => useCall(Ping);
export const h = () => useSubscription(Feed);
export const i: Promise<number> = client.call(Add, [1, 2]);
client.notify(Say, { text: 'hi' });
export const j = client.subscribe(Room, { room: 'a' });
`);
    expect(errors).toEqual([]);
  });

  it('are required where the descriptor has them', () => {
    const errors = typeErrors(`${declarations}
export const a = client.call(Add);
export const b = session.call(Add);
export const c = shared.call(Add);
client.notify(Say);
export const d = client.subscribe(Room);
export const e = shared.subscribe(Room);
export const f = () => useCall(Add);
export const g = () => useSubscription(Room);
export const h = client.call(Add, ['1', 2]);
`);
    expect(errors.map((e) => e.split(':')[0])).toEqual([
      '17',
      '18',
      '19',
      '20',
      '21',
      '22',
      '23',
      '24',
      '25',
    ]);
  });
});
