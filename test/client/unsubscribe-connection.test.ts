/**
 * An unsubscribe belongs to the connection whose subscription it ends: the server's ids are its
 * own, and a later connection may hand the same id to another subscription. So it is never sent
 * on a later connection (refused -32006 on one the server asked the client to leave, it is not
 * sent again where the client goes next: that connection's close ends the subscription anyway),
 * and, refused for a moment on its own connection (the server's rate limit), it is sent again
 * there until the subscription is gone: left on the server, it would go on taking the
 * connection's bytes and a place in its maxSubscriptions.
 */
import { afterEach, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { Resources } from '../support/resources.js';
import { rawWsServer } from '../support/raw-ws-server.js';
import { untilSample } from '../support/metrics.js';
import { waitFor } from '../support/waiting.js';

const res = new Resources();
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
  await res.cleanup();
});

interface Message {
  id?: number;
  method?: string;
  params?: unknown;
}

const reply = (socket: WebSocket, id: number | undefined, result: unknown): void =>
  socket.send(JSON.stringify({ jsonrpc: '2.0', result, id }));

it('an unsubscribe refused -32006 while leaving a connection is not sent on the next one', async () => {
  // B hands out the same subscription ids as A, and records what it is asked.
  const onB: string[] = [];
  const b = await rawWsServer(cleanups, (socket, text) => {
    const message = JSON.parse(text) as Message;
    onB.push(message.method ?? 'reply');
    if (message.method === 'subscribe') reply(socket, message.id, 's1');
    else if (message.method === 'echo') reply(socket, message.id, 'echo');
  });
  const a = await rawWsServer(cleanups, (socket, text) => {
    const message = JSON.parse(text) as Message;
    if (message.method === 'subscribe') reply(socket, message.id, 's1');
    if (message.method !== 'unsubscribe') return;
    // The drain's notice crossed the unsubscribe: it is refused.
    socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'rpc.reconnect', params: { url: b } }));
    socket.send(
      JSON.stringify({
        jsonrpc: '2.0',
        error: { code: -32006, message: 'Server shutting down' },
        id: message.id,
      }),
    );
  });
  const client = res.client([a, b], { heartbeat: false, inbox: false });
  await client.opened();
  const observer = client.subscribe('t').subscribe();
  await waitFor(() => client.subscriptionOf('t') !== undefined, 'subscribed');
  await new Promise((resolve) => setTimeout(resolve, 20));
  observer.unsubscribe();
  await waitFor(() => client.url === b, 'on B');
  await client.opened();
  // Anything queued for B went before this.
  expect(await client.call('echo')).toBe('echo');
  expect(onB).not.toContain('unsubscribe');
});

it('an unsubscribe refused by the rate limit is sent again until the subscription is gone', async () => {
  const { url, httpUrl, gateway } = await res.gateway({
    heartbeatIntervalMs: 0,
    limits: { ratePerSecond: 4, rateBurst: 3, metricsCacheMs: 0 },
  });
  gateway.topic('t');
  gateway.method('echo', () => 'echo');
  const client = res.client(url, {
    heartbeat: false,
    inbox: false,
    reconnect: { initialDelayMs: 100, maxDelayMs: 400 },
  });
  await client.opened();
  const observer = client.subscribe('t').subscribe();
  await untilSample(httpUrl, 'rpc_subscriptions', { topic: 't' }, 1);
  // The rest of the burst: the unsubscribe right after is refused -32003.
  await Promise.allSettled([client.call('echo'), client.call('echo'), client.call('echo')]);
  observer.unsubscribe();
  await untilSample(httpUrl, 'rpc_subscriptions', { topic: 't' }, 0);
  expect(client.state).toBe('open');
});
