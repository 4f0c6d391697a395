// What an open session keeps of its WebSocket upgrade's request (src/server/identity.ts): the
// request, with its headers, URL and cookies, outweighs the rest of a session, so it is kept only
// when an authenticate hook will see it again (in-band authentication, a refresh).
import type { IncomingMessage } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import type { UpgradeRequest } from '../../src/server/options.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { openRawRpc } from './raw-rpc.js';
import type { RawRpc } from './raw-rpc.js';
import { fullGc } from '../support/heap.js';

let running: RunningGateway<unknown> | undefined;
const sockets: RawRpc[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.close();
  await running?.gateway.close();
  running = undefined;
});

/** Weak references to the gateway's upgrade requests, as they come. */
function watchUpgrades(gateway: RunningGateway<unknown>['gateway']): WeakRef<IncomingMessage>[] {
  const refs: WeakRef<IncomingMessage>[] = [];
  // The gateway takes its upgrades in the server's emit, before any listener: wrap that.
  const server = gateway.httpServer;
  // eslint-disable-next-line @typescript-eslint/unbound-method -- applied to the server below
  const emit = server.emit;
  server.emit = function (this: typeof server, event: string | symbol, ...args: unknown[]) {
    if (event === 'upgrade') refs.push(new WeakRef(args[0] as IncomingMessage));
    return Reflect.apply(emit, this, [event, ...args]) as boolean;
  } as typeof server.emit;
  return refs;
}

/** Collect after this turn, when a WeakRef made earlier no longer keeps its target. */
async function collected(refs: WeakRef<object>[]): Promise<boolean[]> {
  await new Promise((resolve) => setImmediate(resolve));
  fullGc(3);
  return refs.map((ref) => ref.deref() === undefined);
}

describe('what a session keeps of its upgrade request', () => {
  it('nothing, without an authenticate hook; rpc.authenticate still answers with the session id', async () => {
    running = await startGateway();
    const refs = watchUpgrades(running.gateway);
    for (let i = 0; i < 3; i++) sockets.push(await openRawRpc(running.url, { 'x-note': `c${i}` }));
    expect(running.gateway.sessions.size).toBe(3);
    expect(await collected(refs)).toEqual([true, true, true]);

    const reply = await sockets[0]!.request('rpc.authenticate', { token: 'anything' });
    const [id] = [...running.gateway.sessions.keys()];
    expect(reply.result).toEqual({ sessionId: id });
  });

  it('the request, with an authenticate hook: a refresh sees the upgrade headers with the new token', async () => {
    const seen: Pick<UpgradeRequest, 'phase' | 'token' | 'headers'>[] = [];
    const started = await startGateway<unknown>({
      authenticate: ({ phase, token, headers }) => {
        seen.push({ phase, token, headers });
        return { token };
      },
    });
    running = started;
    const refs = watchUpgrades(started.gateway);
    const socket = await openRawRpc(started.url, {
      authorization: 'Bearer first',
      'x-note': 'kept',
    });
    sockets.push(socket);
    expect(await collected(refs)).toEqual([false]);
    const reply = await socket.request('rpc.authenticate', { token: 'second' });
    expect(reply.error).toBeUndefined();
    expect(seen.map(({ phase, token, headers }) => [phase, token, headers['x-note']])).toEqual([
      ['upgrade', 'first', 'kept'],
      ['refresh', 'second', 'kept'],
    ]);
  });
});
