/*
 * `maxJoined` (the bound on subscriptions the server makes, rpc.joined) through the shared
 * worker: given to the worker script's host or to the first tab, the worker's client holds that
 * many, and the next join is refused (unsubscribed, never announced) as a plain client's is
 * (subscription-bounds.test.ts). Against a `ws` server scripted here, the host over Node
 * MessageChannel ports (test/support/shared-tabs.ts).
 */
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import type { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { ClientHostOptions, SharedClientOptions } from '../../src/client/shared/index.js';
import { ReservedMethod } from '../../src/protocol/reserved.js';
import { SharedTabs } from '../support/shared-tabs.js';
import { waitFor } from '../support/waiting.js';

interface Request {
  method: string;
  params?: unknown;
  id?: number;
}

const shared = new SharedTabs();
const servers: WebSocketServer[] = [];
afterEach(async () => {
  await shared.cleanup();
  for (const server of servers.splice(0)) {
    for (const socket of server.clients) socket.terminate();
    await new Promise((resolve) => server.close(resolve));
  }
});

const answer = (socket: WebSocket, id: number | undefined, result: unknown) =>
  socket.send(JSON.stringify({ jsonrpc: '2.0', id, result }));

/**
 * A server that, asked `join` with a count, answers it and then joins the client to that many
 * topics (`t.0`, `t.1`, …, subscriptions `s0`, `s1`, …) in one frame; it records each
 * subscription the client unsubscribes.
 */
async function joiningServer() {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  servers.push(server);
  await new Promise((resolve) => server.once('listening', resolve));
  const unsubscribed: unknown[] = [];
  server.on('connection', (socket) => {
    socket.on('message', (data) => {
      const parsed = JSON.parse((data as Buffer).toString('utf8')) as Request | Request[];
      for (const request of Array.isArray(parsed) ? parsed : [parsed]) {
        if (request.method === 'unsubscribe') {
          unsubscribed.push((request.params as unknown[])[0]);
          answer(socket, request.id, true);
        } else if (request.method === 'join') {
          answer(socket, request.id, null);
          const count = request.params as [number];
          const joins = Array.from({ length: count[0] }, (_, i) => ({
            jsonrpc: '2.0',
            method: ReservedMethod.Joined,
            params: { topic: `t.${i}`, subscription: `s${i}` },
          }));
          socket.send(JSON.stringify(joins));
        }
      }
    });
  });
  const { port } = server.address() as AddressInfo;
  return { url: `ws://127.0.0.1:${port}/rpc`, unsubscribed };
}

/** One tab through a host made with `hostOptions`; the server joins it to `joins` topics. */
async function joinThroughHost(
  joins: number,
  hostOptions: ClientHostOptions,
  tabOptions: Partial<SharedClientOptions> = {},
) {
  const { url, unsubscribed } = await joiningServer();
  const host = shared.host({ heartbeat: false, ...hostOptions });
  const { tab } = shared.tab(host, url, tabOptions);
  const announced: string[] = [];
  tab.joined$.subscribe(({ topic }) => announced.push(topic));
  // Posted after the tab's joined$ on the same port: the host follows its joins by then.
  await tab.call('join', [joins]);
  return { tab, announced, unsubscribed };
}

describe('maxJoined through the shared worker', () => {
  it("the host's maxJoined: that many held, the next one refused", async () => {
    const { announced, unsubscribed } = await joinThroughHost(3, { maxJoined: 2 });
    await waitFor(
      () => unsubscribed.length === 1,
      () => `${unsubscribed.length} unsubscribed`,
    );
    await waitFor(
      () => announced.length === 2,
      () => `${announced.length} announced`,
    );
    expect(unsubscribed).toEqual(['s2']);
    expect(announced).toEqual(['t.0', 't.1']);
  });

  it("the first tab's maxJoined reaches the worker's client", async () => {
    const { announced, unsubscribed } = await joinThroughHost(3, {}, { maxJoined: 2 });
    await waitFor(
      () => unsubscribed.length === 1,
      () => `${unsubscribed.length} unsubscribed`,
    );
    await waitFor(
      () => announced.length === 2,
      () => `${announced.length} announced`,
    );
    expect(unsubscribed).toEqual(['s2']);
    expect(announced).toEqual(['t.0', 't.1']);
  });

  it("the host's maxJoined over the tab's", async () => {
    const { unsubscribed } = await joinThroughHost(3, { maxJoined: 1 }, { maxJoined: 2 });
    await waitFor(
      () => unsubscribed.length === 2,
      () => `${unsubscribed.length} unsubscribed`,
    );
    expect(unsubscribed).toEqual(['s1', 's2']);
  });
});
