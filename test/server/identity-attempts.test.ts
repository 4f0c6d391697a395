// The tokens a session presents (rpc.authenticate, in-band or as a refresh) are checked one at a
// time: at most MAX_WAITING_AUTHENTICATIONS wait behind the one being checked (more are answered
// -32000 at once), a waiting one whose connection closed or is closing (an in-band connection's
// third refusal) is answered without running the hook, and a refresh that succeeds puts the new
// identity's timers in force before the subscriptions are weighed again, so the old expiry does
// not end the session meanwhile.
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import {
  MAX_AUTHENTICATE_REFUSALS,
  MAX_WAITING_AUTHENTICATIONS,
} from '../../src/server/identity.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { deferred, sleep } from '../support/promises.js';
import type { Deferred } from '../support/promises.js';
import { waitUntil, within } from '../support/waiting.js';
import { token, tokenIdentity } from './identity-tokens.js';
import type { TestContext } from './identity-tokens.js';
import { openRawRpc } from './raw-rpc.js';
import type { RawRpc } from './raw-rpc.js';

let running: RunningGateway<unknown> | undefined;
const sockets: RawRpc[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.close();
  await running?.gateway.close();
  running = undefined;
});

async function open(url: string, headers?: Record<string, string>): Promise<RawRpc> {
  const socket = await openRawRpc(url, headers);
  sockets.push(socket);
  return socket;
}

/** Every macrotask the gateway had queued has run (the hook's promises settle without I/O). */
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * An in-band gateway whose hook refuses every token, once `gate` (when set) lets it; `tokens`
 * holds every token the hook was run with.
 */
async function refusingGateway() {
  const tokens: string[] = [];
  const hook = { gate: undefined as Deferred<void> | undefined };
  running = await startGateway<unknown>({
    authenticate: async ({ token: presented, phase }) => {
      if (phase === 'upgrade') return {};
      tokens.push(presented ?? '');
      await hook.gate?.promise;
      throw new UpgradeRejection(401, 'bad token');
    },
    identity: { inBand: true },
  });
  return { ...running, tokens, hook };
}

function authenticate(id: number, presented: string) {
  return { jsonrpc: '2.0', id, method: 'rpc.authenticate', params: { token: presented } };
}

/** A raw socket's `send`, for frames built by hand (a batch). */
function sendRaw(socket: RawRpc, frame: unknown): void {
  socket.socket.send(JSON.stringify(frame));
}

/** The reply to request `id`, read off the wire (requests sent by hand). */
function replyTo(socket: RawRpc, id: number): Promise<{ error?: { code: number } }> {
  return new Promise((resolve) => {
    const onMessage = (data: Buffer): void => {
      const frames = [JSON.parse(data.toString('utf8')) as unknown].flat() as {
        id?: number;
        error?: { code: number };
      }[];
      const reply = frames.find((frame) => frame.id === id);
      if (!reply) return;
      socket.socket.off('message', onMessage);
      resolve(reply);
    };
    socket.socket.on('message', onMessage);
  });
}

describe('rpc.authenticate attempts of one session', () => {
  it(`at most ${MAX_WAITING_AUTHENTICATIONS} wait behind the one being checked; more are answered -32000 at once`, async () => {
    const { url, tokens, hook } = await refusingGateway();
    hook.gate = deferred();
    const socket = await open(url);
    const count = MAX_WAITING_AUTHENTICATIONS + 4;
    const ids = Array.from({ length: count }, (_, i) => i + 1);
    const busy = ids.slice(MAX_WAITING_AUTHENTICATIONS + 1).map((id) => replyTo(socket, id));
    // One frame each: a batch is answered as a whole, once every call in it is.
    for (const id of ids) sendRaw(socket, authenticate(id, `t${id}`));
    for (const reply of await within(Promise.all(busy), 'the busy answers')) {
      expect(reply.error).toMatchObject({
        code: ErrorCode.ServerBusy,
        data: { maxWaiting: MAX_WAITING_AUTHENTICATIONS },
      });
    }
    expect(tokens).toEqual(['t1']);
    const closed = socket.closed;
    hook.gate.resolve();
    expect(await within(closed, 'the close')).toEqual({
      code: 4401,
      reason: 'authentication refused',
    });
    expect(tokens).toEqual(ids.slice(0, MAX_WAITING_AUTHENTICATIONS + 1).map((id) => `t${id}`));
  });

  it('attempts waiting when the connection closes are answered without running the hook', async () => {
    const { gateway, url, tokens, hook } = await refusingGateway();
    hook.gate = deferred();
    const socket = await open(url);
    sendRaw(socket, [
      authenticate(1, 'first'),
      authenticate(2, 'second'),
      authenticate(3, 'third'),
    ]);
    await waitUntil(() => tokens.length === 1, 'the first check');
    socket.close();
    await waitUntil(() => gateway.sessions.size === 0, 'the session to close');
    hook.gate.resolve();
    await nextTurn();
    expect(tokens).toEqual(['first']);
  });

  it(`an in-band connection's attempts waiting behind its ${MAX_AUTHENTICATE_REFUSALS}rd refusal do not run the hook`, async () => {
    const { url, tokens } = await refusingGateway();
    const socket = await open(url);
    for (let i = 1; i < MAX_AUTHENTICATE_REFUSALS; i++) {
      const refused = await socket.request('rpc.authenticate', { token: `early${i}` });
      expect(refused.error).toMatchObject({ code: ErrorCode.Unauthenticated });
    }
    const closed = socket.closed;
    sendRaw(socket, [
      authenticate(10, 'last'),
      authenticate(11, 'after1'),
      authenticate(12, 'after2'),
    ]);
    expect(await within(closed, 'the close')).toEqual({
      code: 4401,
      reason: 'authentication refused',
    });
    expect(tokens).toEqual(['early1', 'early2', 'last']);
  });
});

describe('a refresh that succeeds near the old expiry', () => {
  it('is not undone by the old expiry while the subscriptions are weighed again', async () => {
    const weighing = { gate: undefined as Deferred<void> | undefined, started: deferred() };
    const started = await startGateway<TestContext>(tokenIdentity({ refreshAheadMs: 100 }));
    running = started as unknown as RunningGateway<unknown>;
    const { gateway, url } = started;
    gateway.topic('news.*', {
      authorize: async () => {
        if (!weighing.gate) return true;
        weighing.started.resolve();
        await weighing.gate.promise;
        return true;
      },
    });
    gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
    const socket = await open(url, { authorization: `Bearer ${token({ user: 'ann', ttl: 400 })}` });
    expect((await socket.request('subscribe', ['news.a'])).error).toBeUndefined();
    const [session] = gateway.sessions.values();
    const oldExpiry = session!.expiresAt!;
    weighing.gate = deferred();
    const refresh = socket.request('rpc.authenticate', {
      token: token({ user: 'ann', ttl: 60_000 }),
    });
    await within(weighing.started.promise, 'the subscriptions weighed again');
    // A timer due after the old expiry's runs after it.
    await sleep(Math.max(0, oldExpiry - Date.now()) + 20);
    expect((await socket.request('whoami')).result).toBe('ann');
    weighing.gate.resolve();
    const reply = await refresh;
    expect(reply.result).toMatchObject({ user: 'ann', expiresAt: session!.expiresAt });
    expect((await socket.request('whoami')).result).toBe('ann');
    expect(session!.isClosed).toBe(false);
  });
});
