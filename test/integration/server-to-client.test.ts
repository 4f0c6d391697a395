import { firstValueFrom, take, toArray } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { AskClient, ClientConfirm, Hello } from '../../demo/service.js';
import {
  ConnectionClosedError,
  InternalError,
  InvalidParamsError,
  JsonRpcError,
  MethodNotFoundError,
  TimeoutError,
  method,
  notification,
} from '../../src/index.js';
import type { RpcClient, Session } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { deferred, rejectionOf, untilAborted } from '../support/promises.js';

const res = new Resources();
afterEach(() => res.cleanup());

const Multiply = method<{ a: number; b: number }, number>('client.multiply');
const Tick = notification<{ n: number }>('tick');

/** A demo gateway, a client on it, and the server's Session for that client. */
async function connected(
  setup: (client: RpcClient) => void = () => undefined,
): Promise<{ client: RpcClient; session: Session }> {
  const { url, gateway } = await res.demoGateway();
  const sessionPromise = firstValueFrom(gateway.connected$);
  const client = res.client(url);
  setup(client);
  const session = await sessionPromise;
  await client.opened();
  return { client, session };
}

describe('server-to-client calls and notifications', () => {
  it('session.call awaits the result of the client handler', async () => {
    const seen: unknown[] = [];
    const { client, session } = await connected((c) => {
      c.method(Multiply, async ({ a, b }, ctx) => {
        seen.push({ method: ctx.method, isClient: ctx.session === c });
        await new Promise((r) => setImmediate(r));
        return a * b;
      });
      c.method('client.echo', (params) => params);
    });

    expect(await session.call(Multiply, { a: 6, b: 7 })).toBe(42);
    expect(await session.call('client.echo', ['x', { y: 1 }])).toEqual(['x', { y: 1 }]);
    expect(seen).toEqual([{ method: 'client.multiply', isClient: true }]);

    // Both directions at once on the same connection.
    const [fromServer, fromClient] = await Promise.all([
      session.call(Multiply, { a: 3, b: 3 }),
      client.call('sum', [1, 2, 3]),
    ]);
    expect([fromServer, fromClient]).toEqual([9, 6]);
  });

  it('finds the session through gateway.sessions as well', async () => {
    const { url, gateway } = await res.demoGateway();
    const client = res.client(url);
    client.method('client.name', () => 'node-client');
    await client.opened();
    expect(gateway.sessions.size).toBe(1);
    const [session] = [...gateway.sessions.values()];
    expect(session!.remoteAddress).toBe('127.0.0.1');
    expect(await session!.call('client.name')).toBe('node-client');
  });

  it('round-trips the demo ask_client through the client.confirm handler', async () => {
    const questions: string[] = [];
    const { client } = await connected((c) =>
      c.method(ClientConfirm, ({ question }) => {
        questions.push(question);
        return question.endsWith('?') ? 'yes' : 'no';
      }),
    );

    expect(await client.call(AskClient, { question: 'Proceed?' })).toEqual({
      question: 'Proceed?',
      answer: 'yes',
    });
    expect(await client.call(AskClient, ['Stop'])).toEqual({ question: 'Stop', answer: 'no' });
    expect(questions).toEqual(['Proceed?', 'Stop']);

    const bad = await rejectionOf(client.call(AskClient, { question: 7 } as never));
    expect(bad).toBeInstanceOf(InvalidParamsError);
  });

  it('ask_client without a client.confirm handler fails with the client-side Method not found', async () => {
    const { client } = await connected();
    const err = await rejectionOf(client.call(AskClient, { question: 'anyone?' }));
    expect(err).toBeInstanceOf(MethodNotFoundError);
    expect(err).toMatchObject({ code: -32601 });
  });

  it('a client handler that throws gives the server a JsonRpcError', async () => {
    const { session } = await connected((c) => {
      c.method('client.crash', () => {
        throw new Error('client internals');
      });
      c.method('client.refuse', () => {
        throw new JsonRpcError(4001, 'User refused', { why: 'no' });
      });
      c.method('client.rejectAsync', () => Promise.reject(new InvalidParamsError('bad')));
    });

    const crash = await rejectionOf(session.call('client.crash'));
    expect(crash).toBeInstanceOf(InternalError);
    expect(crash).toMatchObject({ code: -32603, message: 'Internal error' });

    const refuse = await rejectionOf(session.call('client.refuse'));
    expect(refuse).toBeInstanceOf(JsonRpcError);
    expect(refuse).toMatchObject({ code: 4001, message: 'User refused', data: { why: 'no' } });

    const rejected = await rejectionOf(session.call('client.rejectAsync'));
    expect(rejected).toBeInstanceOf(InvalidParamsError);

    const missing = await rejectionOf(session.call('client.nothing'));
    expect(missing).toBeInstanceOf(MethodNotFoundError);

    // Still connected afterwards.
    expect(session.isClosed).toBe(false);
  });

  it('session.call times out locally when the client does not answer in time', async () => {
    const { session } = await connected((c) =>
      c.method('client.never', (_p, ctx) => untilAborted(ctx.signal)),
    );
    const err = await rejectionOf(session.call('client.never', undefined, { timeoutMs: 50 }));
    expect(err).toBeInstanceOf(TimeoutError);
  });

  it('a pending session.call rejects with ConnectionClosedError when the client closes', async () => {
    const started = deferred();
    const clientAborted = deferred();
    const { client, session } = await connected((c) =>
      c.method('client.never', (_p, ctx) => {
        ctx.signal.addEventListener('abort', () => clientAborted.resolve());
        started.resolve();
        return untilAborted(ctx.signal);
      }),
    );
    const pending = rejectionOf(session.call('client.never', undefined, { timeoutMs: 0 }));
    await started.promise;
    await client.close();
    const err = await pending;
    expect(err).toBeInstanceOf(ConnectionClosedError);
    await clientAborted.promise;
    expect(await session.closed).toMatchObject({ code: 1000 });
  });

  it('session.notify reaches client.notificationsOf and notifications$', async () => {
    const { client, session } = await connected();
    const ticks = firstValueFrom(client.notificationsOf(Tick).pipe(take(3), toArray()));
    const all = firstValueFrom(client.notifications$.pipe(take(4), toArray()));
    const hellos = firstValueFrom(client.notificationsOf(Hello));

    session.notify(Tick, { n: 1 });
    session.notify('other', ['x']);
    session.notify(Tick, { n: 2 });
    session.notify('tick', { n: 3 });

    expect(await ticks).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect(await all).toEqual([
      { method: 'tick', params: { n: 1 } },
      { method: 'other', params: ['x'] },
      { method: 'tick', params: { n: 2 } },
      { method: 'tick', params: { n: 3 } },
    ]);

    // The demo's notify_hello answers with a `hello` notification on the same session.
    expect(await client.call('notify_hello', [7])).toBeNull();
    expect(await hellos).toEqual([7]);
  });

  it('broadcasts to every session', async () => {
    const { url, gateway } = await res.demoGateway();
    const clients = [res.client(url), res.client(url), res.client(url)];
    const received = clients.map((c) => firstValueFrom(c.notificationsOf<[string]>('news')));
    await Promise.all(clients.map((c) => c.opened()));
    for (const session of gateway.sessions.values()) session.notify('news', ['flash']);
    expect(await Promise.all(received)).toEqual([['flash'], ['flash'], ['flash']]);
  });
});
