import { createServer } from 'node:net';
import type { Socket } from 'node:net';
import { firstValueFrom, lastValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { Sum } from '../../demo/service.js';
import { ConnectionClosedError, NotConnectedError, UpgradeRejection } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { deferred, rejectionOf, sleep, untilAborted } from '../support/promises.js';
import { recordStates, waitForState } from '../support/client.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('client.close()', () => {
  it('rejects pending calls, ends in closed, and the server sees a 1000 close', async () => {
    const { url, gateway } = await res.demoGateway();
    const started = deferred();
    const serverAborted = deferred();
    gateway.method('hang', (_params, ctx) => {
      ctx.signal.addEventListener('abort', () => serverAborted.resolve());
      started.resolve();
      return untilAborted(ctx.signal);
    });
    const sessionPromise = firstValueFrom(gateway.connected$);
    const client = res.client(url);
    const { done } = recordStates(client);
    const pending = rejectionOf(client.call('hang', undefined, { timeoutMs: 0 }));
    const session = await sessionPromise;
    await started.promise;

    await client.close();
    expect(client.state).toBe('closed');
    const err = await pending;
    expect(err).toBeInstanceOf(ConnectionClosedError);
    expect(await done).toEqual(['connecting', 'open', 'closed']);
    expect(await session.closed).toMatchObject({ code: 1000 });
    await serverAborted.promise;

    // Everything after close fails at once.
    expect(await rejectionOf(client.call(Sum, [1]))).toBeInstanceOf(NotConnectedError);
    expect(await rejectionOf(client.batch([{ method: 'sum', params: [1] }]))).toBeInstanceOf(
      NotConnectedError,
    );
    expect(() => client.notify('update', [1])).toThrow(NotConnectedError);
    // A second close is harmless.
    await client.close();
  });

  it('rejects queued calls with NotConnectedError', async () => {
    const first = await res.demoGateway();
    const client = res.client(first.url);
    await client.opened();
    await first.gateway.close();
    await waitForState(client, 'reconnecting');

    const queued = [rejectionOf(client.call(Sum, [1])), rejectionOf(client.call(Sum, [2]))];
    const queuedBatch = rejectionOf(client.batch([{ method: 'sum', params: [3] }]));
    client.notify('update', [1]);
    await client.close();
    for (const err of await Promise.all([...queued, queuedBatch])) {
      expect(err).toBeInstanceOf(NotConnectedError);
    }
    expect(client.state).toBe('closed');
  });

  it('does not reconnect after close', async () => {
    // Two clients with the same backoff lose the same gateway; one of them is closed.
    const attempts: string[] = [];
    const authenticate = ({ query }: { query: URLSearchParams }) => {
      attempts.push(query.get('who') ?? '?');
      return undefined;
    };
    const first = await res.gateway({ authenticate });
    const closed = res.client(`${first.url}?who=closed`);
    const control = res.client(`${first.url}?who=control`);
    await Promise.all([closed.opened(), control.opened()]);
    await first.gateway.close();
    await Promise.all([
      waitForState(closed, 'reconnecting'),
      waitForState(control, 'reconnecting'),
    ]);
    await closed.close();
    attempts.length = 0;

    const second = await res.gateway({ authenticate }, first.port);
    await waitForState(control, 'open');
    // Give the closed client several backoff periods (maxDelayMs is 200 in tests) to misbehave.
    await sleep(600);
    expect(attempts).toEqual(['control']);
    expect(second.gateway.sessions.size).toBe(1);
    expect(closed.state).toBe('closed');
  });

  it('closes cleanly while a connection attempt is still in progress', async () => {
    // A TCP server that accepts and never answers the upgrade.
    const held: Socket[] = [];
    const gotConnection = deferred();
    const server = createServer((socket) => {
      held.push(socket);
      res.netSockets.push(socket);
      socket.on('error', () => undefined);
      gotConnection.resolve();
    });
    res.netServers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;

    const client = res.client(`ws://127.0.0.1:${port}/rpc`);
    const queued = rejectionOf(client.call(Sum, [1]));
    await gotConnection.promise;
    expect(client.state).toBe('connecting');
    await client.close();
    expect(client.state).toBe('closed');
    expect(await queued).toBeInstanceOf(NotConnectedError);
    // The half-made connection is dropped by the client.
    await new Promise<void>((resolve) => {
      if (held[0]!.destroyed || held[0]!.readableEnded) return resolve();
      held[0]!.once('close', () => resolve());
    });
    expect(await lastValueFrom(client.state$, { defaultValue: 'completed' })).toBe('completed');
  });

  it('opened() rejects with NotConnectedError after close()', async () => {
    const { url } = await res.demoGateway();
    const client = res.client(url);
    await client.opened();
    await client.close();
    // The state is 'closed', so opened() must say so rather than fail with an rxjs EmptyError.
    const err = await rejectionOf(client.opened());
    expect(err).toBeInstanceOf(NotConnectedError);
  });

  it('with reconnect: false a failed connection ends in closed and opened() rejects', async () => {
    const { url } = await res.demoGateway({
      authenticate: () => {
        throw new UpgradeRejection(503);
      },
    });
    const client = res.client(url, { reconnect: false });
    const err = await rejectionOf(client.opened());
    expect(err).toBeInstanceOf(NotConnectedError);
    expect(client.state).toBe('closed');
  });
});
