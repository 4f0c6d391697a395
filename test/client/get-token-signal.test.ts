/*
 * getToken is given `{ signal }`, aborted once its token is no longer wanted: the client closed,
 * the connect attempt it serves timed out (connectTimeoutMs), or every request of the server's
 * (rpc.token) waiting on it was given up. Nothing waits on a getToken whose signal aborted, and
 * a token it gives after that goes nowhere. Against a plain `ws` server that reads what the
 * client sends (its in-band tokens) and asks for fresh ones itself.
 */
import fc from 'fast-check';
import type { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { NotConnectedError } from '../../src/client/index.js';
import type { ClientOptions, RpcClient } from '../../src/client/index.js';
import { ReservedMethod } from '../../src/protocol/reserved.js';
import { FakeGateways, frameOf, send } from '../support/fake-gateway.js';
import { SharedTabs } from '../support/shared-tabs.js';
import type { ClientFrame } from '../support/fake-gateway.js';
import { deferred, rejectionOf } from '../support/promises.js';
import { waitUntil, within } from '../support/waiting.js';

const gateways = new FakeGateways({
  tokenTransport: 'in-band',
  reconnect: { initialDelayMs: 5, maxDelayMs: 20, jitter: 0 },
});
const shared = new SharedTabs();
afterEach(async () => {
  await shared.cleanup();
  await gateways.cleanup();
});

/** One getToken call: the signal it was given, and how to answer it. */
interface Asked {
  signal: AbortSignal | undefined;
  token: ReturnType<typeof deferred<string>>;
}

/** A getToken that answers only when the test does, keeping each call. */
function heldTokens() {
  const asked: Asked[] = [];
  const getToken = (request?: { signal: AbortSignal }): Promise<string> => {
    const token = deferred<string>();
    asked.push({ signal: request?.signal, token });
    return token.promise;
  };
  return { asked, getToken };
}

/** A server that answers rpc.authenticate and `echo`, keeping each connection's frames. */
async function server() {
  const tokens: string[] = [];
  const sockets: WebSocket[] = [];
  const frames: ClientFrame[][] = [];
  const { url } = await gateways.listen((socket) => {
    sockets.push(socket);
    const mine: ClientFrame[] = [];
    frames.push(mine);
    socket.on('message', (data) => {
      const frame = frameOf(data);
      mine.push(frame);
      if (frame.method === ReservedMethod.Authenticate) {
        tokens.push((frame.params as { token: string }).token);
        send(socket, { id: frame.id, result: { sessionId: `s${sockets.length}` } });
      } else if (frame.method === 'echo') send(socket, { id: frame.id, result: 'echo' });
    });
  });
  return { url, tokens, sockets, frames };
}

const client = (url: string, options: Partial<ClientOptions>): RpcClient =>
  gateways.client({ url, ...options });

describe("getToken's signal", () => {
  it('a getToken that hangs on the first dial is aborted by close(), which does not wait on it', async () => {
    const { url } = await server();
    const { asked, getToken } = heldTokens();
    const c = client(url, { getToken });
    await waitUntil(() => asked.length === 1, 'the first dial asking for a token');
    expect(asked[0]!.signal?.aborted).toBe(false);
    await within(c.close(), 'close() while getToken hangs');
    expect(asked[0]!.signal?.aborted).toBe(true);
    expect(asked).toHaveLength(1);
  });

  it('the connect deadline aborts the dial’s getToken; its late token is never sent, the next dial’s is', async () => {
    const { url, tokens } = await server();
    const { asked, getToken: held } = heldTokens();
    // The first dial's getToken hangs; the dials after it get a token at once (a deadline long
    // enough for a loaded machine to open and authenticate within it).
    let dials = 0;
    const c = client(url, {
      connectTimeoutMs: 1_000,
      getToken: (request?: { signal: AbortSignal }) => (dials++ === 0 ? held(request) : 'fresh'),
    });
    await within(c.opened(), 'a connection with a later dial’s token');
    const [first] = asked;
    expect(first!.signal?.aborted).toBe(true);
    expect(first!.signal?.reason).toBeInstanceOf(Error);
    first!.token.resolve('late');
    await first!.token.promise;
    expect(await c.call('echo')).toBe('echo');
    expect(tokens.length).toBeGreaterThan(0);
    expect(tokens.every((token) => token === 'fresh')).toBe(true);
  });

  it('authenticate() waiting on a getToken that hangs rejects at close(), and the getToken is aborted', async () => {
    const { url } = await server();
    let held: Asked | undefined;
    const c = client(url, {
      getToken: (request?: { signal: AbortSignal }) => {
        if (held === undefined && request && c.state === 'open') {
          held = { signal: request.signal, token: deferred<string>() };
          return held.token.promise;
        }
        return 'tok';
      },
    });
    await c.opened();
    const refresh = rejectionOf(c.authenticate());
    await waitUntil(() => held !== undefined, 'authenticate() asking for a token');
    expect(held!.signal?.aborted).toBe(false);
    await c.close();
    expect(await within(refresh, 'authenticate() after close()')).toBeInstanceOf(NotConnectedError);
    expect(held!.signal?.aborted).toBe(true);
  });

  it('the server’s rpc.token: the connection closing aborts the getToken it waits on, and the late token is not sent', async () => {
    const { url, sockets, frames } = await server();
    let held: Asked | undefined;
    const c = client(url, {
      getToken: (request?: { signal: AbortSignal }) => {
        if (sockets.length === 1 && c.state === 'open' && !held) {
          held = { signal: request?.signal, token: deferred<string>() };
          return held.token.promise;
        }
        return 'tok';
      },
    });
    await c.opened();
    send(sockets[0]!, { id: 't1', method: ReservedMethod.Token, params: { expiresAt: 0 } });
    await waitUntil(() => held !== undefined, 'rpc.token asking getToken');
    expect(held!.signal?.aborted).toBe(false);
    sockets[0]!.terminate();
    await waitUntil(() => held!.signal?.aborted === true, 'the getToken aborted');
    held!.token.resolve('late');
    await waitUntil(() => sockets.length === 2 && c.state === 'open', 'the next connection');
    expect(await c.call('echo')).toBe('echo');
    for (const frame of frames.flat()) expect(frame.result).toBeUndefined();
  });

  it('a getToken that ignores its argument still works', async () => {
    const { url, tokens } = await server();
    const c = client(url, { getToken: () => 'plain' });
    await c.opened();
    expect(tokens).toEqual(['plain']);
  });
});

/**
 * The server's rpc.token requests share one getToken while it runs. Model: the requests waiting
 * on the current getToken, the one that started it and those that came while it ran. Each request
 * given up is over at once and alone: the others sharing the getToken still get its token; the
 * getToken's signal aborts exactly when the last request waiting on it is given up; a token given
 * after the abort answers nobody; a request made after that asks getToken again.
 */
describe('rpc.token requests sharing one getToken (model)', () => {
  type Command =
    { kind: 'ask' } | { kind: 'cancel'; pick: number } | { kind: 'answer' } | { kind: 'late' };

  const command: fc.Arbitrary<Command> = fc.oneof(
    fc.constant({ kind: 'ask' as const }),
    fc.nat(7).map((pick) => ({ kind: 'cancel' as const, pick })),
    fc.constant({ kind: 'answer' as const }),
    fc.constant({ kind: 'late' as const }),
  );

  it('holds for any sequence of asks, cancels and answers', async () => {
    const { url, sockets, frames } = await server();
    const { asked, getToken } = heldTokens();
    let ready = false;
    const c = client(url, {
      getToken: (request?: { signal: AbortSignal }) =>
        ready ? getToken(request) : Promise.resolve('tok'),
    });
    await c.opened();
    ready = true;
    const socket = sockets[0]!;
    const answers = (): ClientFrame[] =>
      frames[0]!.filter((f) => typeof f.id === 'string' && f.method === undefined);
    let nextId = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(command, { maxLength: 12 }), async (commands) => {
        // Model: the ids waiting on the current getToken call; the calls given up on.
        let waiting: string[] = [];
        let current: Asked | undefined;
        const abandoned: Asked[] = [];
        const answered = new Map<string, 'token' | 'error'>();
        for (const cmd of commands) {
          if (cmd.kind === 'ask') {
            const id = `r${++nextId}`;
            const calls = asked.length;
            send(socket, { id, method: ReservedMethod.Token, params: { expiresAt: 0 } });
            if (!current) {
              await waitUntil(() => asked.length === calls + 1, 'getToken asked');
              current = asked.at(-1)!;
            } else {
              await c.call('echo'); // the request has been read
              expect(asked).toHaveLength(calls);
            }
            waiting.push(id);
          } else if (cmd.kind === 'cancel') {
            if (waiting.length === 0) continue;
            const id = waiting[cmd.pick % waiting.length]!;
            // Whichever request it is (the one that started the getToken too), it ends alone.
            const ended = [id];
            waiting = waiting.filter((w) => !ended.includes(w));
            send(socket, { method: ReservedMethod.Cancel, params: { id } });
            // Over at once: answered with an error, not the token.
            await waitUntil(
              () => ended.every((e) => answers().some((f) => f.id === e)),
              `${ended.join(', ')} answered`,
            );
            for (const e of ended) answered.set(e, 'error');
            if (waiting.length === 0) {
              expect(current!.signal?.aborted).toBe(true);
              abandoned.push(current!);
              current = undefined;
            } else expect(current!.signal?.aborted).toBe(false);
          } else if (cmd.kind === 'answer') {
            if (!current) continue;
            const done = waiting;
            current.token.resolve('fresh');
            await waitUntil(
              () => done.every((id) => answers().some((f) => f.id === id)),
              'the waiting requests answered',
            );
            for (const id of done) answered.set(id, 'token');
            waiting = [];
            current = undefined;
          } else {
            // A token from a getToken given up on: nothing answers with it.
            for (const gone of abandoned.splice(0)) gone.token.resolve('late');
            await c.call('echo');
          }
          for (const frame of answers()) {
            const expected = answered.get(frame.id as string);
            if (expected === undefined) continue;
            if (expected === 'token') expect(frame.result).toEqual({ token: 'fresh' });
            else expect(frame.error).toBeDefined();
          }
          expect(answers().some((f) => JSON.stringify(f.result ?? null).includes('late'))).toBe(
            false,
          );
        }
        // End with nothing waiting, so the next run starts afresh.
        if (current) {
          current.token.resolve('fresh');
          const done = waiting;
          await waitUntil(
            () => done.every((id) => answers().some((f) => f.id === id)),
            'the last requests answered',
          );
        }
        for (const gone of abandoned) gone.token.resolve('late');
      }),
      { numRuns: 25 },
    );
  });
});

/** Through the shared worker: the worker asks a tab's getToken by message, and tells it abort. */
describe("getToken's signal in a tab of the shared connection", () => {
  it('the worker giving up on the token (the connect deadline) aborts the tab’s getToken; a later dial’s token is used', async () => {
    const { url, tokens } = await server();
    const { asked, getToken: held } = heldTokens();
    let calls = 0;
    const host = shared.host({ connectTimeoutMs: 1_000 });
    const { tab } = shared.tab(host, url, {
      getToken: (request) => (calls++ === 0 ? held(request) : 'fresh'),
    });
    expect(await within(tab.call('echo'), 'a call on the connection')).toBe('echo');
    const [first] = asked;
    expect(first!.signal?.aborted).toBe(true);
    first!.token.resolve('late');
    await first!.token.promise;
    expect(await tab.call('echo')).toBe('echo');
    expect(tokens.length).toBeGreaterThan(0);
    expect(tokens.every((token) => token === 'fresh')).toBe(true);
  });

  it('the worker’s client closing aborts the tab’s getToken', async () => {
    const { url } = await server();
    const { asked, getToken } = heldTokens();
    const host = shared.host({});
    shared.tab(host, url, { getToken });
    await waitUntil(() => asked.length === 1, 'the tab asked for a token');
    expect(asked[0]!.signal?.aborted).toBe(false);
    await host.close();
    await waitUntil(() => asked[0]!.signal?.aborted === true, 'the tab’s getToken aborted');
  });
});
