/**
 * The client and the CLI read subscription notifications with one decoder
 * (src/protocol/subscription-frames.ts), so they agree: against a server of the same protocol
 * that hands out numeric subscription ids (jsonrpsee's default), both follow the subscription;
 * a notification for the string "7" is not one for the number 7; a stream error that is not an
 * error object ends both with the same -32603.
 */
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { RpcClient } from '../../src/client/client.js';
import type { SubscriptionEvent } from '../../src/client/subscriptions.js';
import { Deadline } from '../../src/cli/deadline.js';
import { endpointOf } from '../../src/cli/endpoint.js';
import { reportFailure } from '../../src/cli/errors.js';
import { runSubscribe } from '../../src/cli/subscribe.js';
import { WsConnection } from '../../src/cli/ws-connection.js';
import { DEFAULT_SUBSCRIPTION_METHODS } from '../../src/protocol/subscription-frames.js';

const servers: WebSocketServer[] = [];
const cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
  for (const server of servers.splice(0)) {
    for (const client of server.clients) client.terminate();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

/**
 * A server of the subscription protocol, not this gateway: `subscribe` is answered with the
 * number 7, then `frames` (params of `subscription` notifications) follow, then `final` if given.
 */
async function numericIdServer(
  frames: unknown[],
): Promise<{ url: string; unsubscribed: unknown[] }> {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  servers.push(server);
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const unsubscribed: unknown[] = [];
  server.on('connection', (socket: WebSocket) => {
    socket.on('message', (data) => {
      const message = JSON.parse((data as Buffer).toString('utf8')) as {
        method?: string;
        params?: unknown;
        id?: unknown;
      };
      if (message.method === 'rpc.ping') {
        socket.send(JSON.stringify({ jsonrpc: '2.0', result: 'pong', id: message.id }));
      } else if (message.method === 'subscribe') {
        socket.send(JSON.stringify({ jsonrpc: '2.0', result: 7, id: message.id }));
        for (const params of frames) {
          socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'subscription', params }));
        }
      } else if (message.method === 'unsubscribe') {
        unsubscribed.push(message.params);
        socket.send(JSON.stringify({ jsonrpc: '2.0', result: true, id: message.id }));
      }
    });
  });
  const { port } = server.address() as AddressInfo;
  return { url: `ws://127.0.0.1:${port}/rpc`, unsubscribed };
}

const FRAMES = [
  { subscription: 7, seq: 0 },
  { subscription: '7', seq: 1, result: 'not ours: a string id' },
  { subscription: 7, seq: 1, result: { n: 1 } },
  { subscription: 7, seq: 2, result: { n: 2 }, missed: 0 },
  { subscription: 7, gap: 3 },
  { subscription: 7, seq: 6, result: { n: 6 } },
];

/** What the client's subscribeWithMeta gives for `frames`, up to `count` events or its end. */
async function clientEvents(
  url: string,
  count: number,
): Promise<{ events: SubscriptionEvent<unknown>[]; error?: unknown }> {
  const client = new RpcClient({ url, WebSocket, reconnect: false, heartbeat: false });
  cleanups.push(() => client.close());
  const events: SubscriptionEvent<unknown>[] = [];
  return new Promise((resolve) => {
    const subscription = client.subscribeWithMeta('ticks').subscribe({
      next: (event) => {
        events.push(event);
        if (events.length === count) {
          subscription.unsubscribe();
          resolve({ events });
        }
      },
      error: (error: unknown) => resolve({ events, error }),
      complete: () => resolve({ events }),
    });
  });
}

/** Run the CLI's subscribe in-process until the stream ends or `stopAfter` lines are printed. */
async function cliOutput(url: string, stopAfter?: number) {
  const endpoint = endpointOf(new URL(url))!;
  const options = { headers: {}, protocols: [], insecure: false, ca: undefined };
  const deadline = new Deadline(10_000);
  const connection = await WsConnection.open(endpoint, options, deadline);
  cleanups.push(() => connection.close());
  const stop = new AbortController();
  let stdout = '';
  let stderr = '';
  const outcome = await runSubscribe(connection, {
    topic: 'ticks',
    params: undefined,
    methods: { ...DEFAULT_SUBSCRIPTION_METHODS },
    deadline,
    stop: stop.signal,
    stdout: {
      write(text: string) {
        stdout += text;
        if (stopAfter !== undefined && stdout.split('\n').length > stopAfter) stop.abort();
      },
    },
    stderr: { write: (text: string) => (stderr += text) },
  }).then(
    () => 0,
    (err: unknown) => reportFailure(err, { write: (text: string) => (stderr += text) }),
  );
  return { outcome, stdout, stderr };
}

describe('numeric subscription ids: the client and the CLI agree', () => {
  it('both follow the subscription, and neither takes "7" for 7', async () => {
    const { url } = await numericIdServer(FRAMES);
    const { events } = await clientEvents(url, 4);
    expect(events).toEqual([
      { data: { n: 1 }, seq: 1 },
      { data: { n: 2 }, seq: 2, missed: 0 },
      { data: undefined, gap: 3 },
      { data: { n: 6 }, seq: 6 },
    ]);

    const cli = await cliOutput(url, 3);
    expect(cli.outcome).toBe(0);
    expect(cli.stdout).toBe('{"n":1}\n{"n":2}\n{"n":6}\n');
    expect(cli.stderr).toBe("wsrpc: 3 messages were lost (no longer in the server's history)\n");
  });

  it('the CLI unsubscribes with the numeric id when stopped', async () => {
    const server = await numericIdServer(FRAMES);
    await cliOutput(server.url, 3);
    expect(server.unsubscribed).toEqual([[7]]);
  });

  it('a stream error that is not an error object ends both with the same -32603', async () => {
    const frames = [
      { subscription: 7, result: 1 },
      { subscription: 7, error: 'disk full' },
    ];
    const { url } = await numericIdServer(frames);
    const client = await clientEvents(url, 99);
    expect(client.events).toEqual([{ data: 1 }]);
    expect(client.error).toMatchObject({
      code: -32603,
      message: 'the stream ended with an error: "disk full"',
      data: 'disk full',
    });

    const cli = await cliOutput(url);
    expect(cli.outcome).toBe(1);
    expect(cli.stdout).toBe('1\n');
    expect(cli.stderr).toBe(
      'error -32603: the stream ended with an error: "disk full"\ndata: "disk full"\n',
    );
  });
});
