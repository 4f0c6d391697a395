// A notification routed to an HTTP upstream keeps its call slot, and its session's, address's and
// user's shares, until its socket is free again (its reply read to the end, or the socket given
// up), though it is taken, and its client waits for nothing more, once the upstream's 2xx status
// arrives. So an upstream that sends the status first and the body later (or never) cannot let
// one session hold more pool sockets than its shares allow, and another address's call, admitted
// within maxConcurrent, has a socket of its own (docs/gateway-mode.md: "every call admitted has a
// socket of its own, so no call waits for one that another address's calls hold"). Reading a
// notification's reply is bounded in bytes by maxReplyBytes, as a call's reply is.
import { createServer } from 'node:http';
import type { ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { JsonRpcHttpClient, UpstreamError } from '../../src/upstream/index.js';
import type { UpstreamEndpoint } from '../../src/upstream/index.js';
import { Resources } from '../support/resources.js';
import { waitFor } from '../support/waiting.js';
import { clientFrom } from './held-upstream.js';
import { startRoutedGateway } from './routed-gateway.js';

const MAX_REPLY_BYTES = 64 * 1024;

const res = new Resources();
const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  await res.cleanup();
  for (const stop of stops.splice(0)) await stop();
});

/**
 * Notifications: 200 and the headers at once, then for `note.endless` more than MAX_REPLY_BYTES
 * of body never ended, for any other the body held until `finish`. Calls: answered at once.
 */
async function headersFirstUpstream() {
  const open = new Set<ServerResponse>();
  const sockets = new Set<Socket>();
  const server = createServer((req, reply) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const message = JSON.parse(body) as { id?: number; method: string };
      reply.writeHead(200, { 'content-type': 'application/json' });
      if (message.id !== undefined) {
        reply.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { ok: true } }));
        return;
      }
      reply.flushHeaders();
      open.add(reply);
      reply.on('close', () => open.delete(reply));
      if (message.method === 'note.endless') reply.write('x'.repeat(2 * MAX_REPLY_BYTES));
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const upstream = {
    url: `http://127.0.0.1:${port}/rpc`,
    /** Notification answers whose body is still held (their socket not closed). */
    openCount: () => open.size,
    finish() {
      for (const reply of open) reply.end('');
    },
    async stop() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  stops.push(() => upstream.stop());
  return upstream;
}

/**
 * What became of each notification `endpoint` was given, in order, as each settles: `taken`, or
 * the bound it was refused at. The route's handler still sees the outcome as it was.
 */
function notifyOutcomes(endpoint: UpstreamEndpoint): string[] {
  const outcomes: string[] = [];
  const notify = endpoint.notify.bind(endpoint);
  endpoint.notify = async (...args: Parameters<UpstreamEndpoint['notify']>) => {
    try {
      await notify(...args);
      outcomes.push('taken');
    } catch (err) {
      const bound = err instanceof UpstreamError ? (err.data as { bound?: string }).bound : '';
      outcomes.push(err instanceof UpstreamError ? `${err.failure} ${bound}` : String(err));
      throw err;
    }
  };
  return outcomes;
}

/** The shares an endpoint holds for the session `session`, address `address` and user `user`. */
function heldBy(endpoint: UpstreamEndpoint, session: object, address: string, user: string) {
  return {
    inFlight: endpoint.inFlight,
    session: endpoint.inFlightOf(session),
    address: endpoint.inFlightFrom(address),
    user: endpoint.inFlightFor(user),
  };
}

describe('notifications to an HTTP upstream that answers with headers first', () => {
  it("cannot let one session hold every pool socket and keep another address's call from its socket", async () => {
    const upstream = await headersFirstUpstream();
    const running = await startRoutedGateway({
      upstreams: {
        // 4 calls at once, 4 sockets; one session's share 1, one address's 2.
        svc: {
          url: upstream.url,
          maxConcurrent: 4,
          maxConcurrentPerSession: 1,
          maxConcurrentPerAddress: 2,
          reservedForNewCallers: 0,
          timeoutMs: 60_000,
        },
      },
      methods: {
        'note.*': 'svc',
        'fast.*': { upstream: 'svc', timeoutMs: 2_000 },
      },
    });
    stops.unshift(async () => {
      upstream.finish();
      await running.close();
    });
    const a = await clientFrom(res, running.url, '127.0.0.2', 'ann');
    const b = await clientFrom(res, running.url, '127.0.0.3', 'bob');
    const endpoint = running.routes.upstreams.get('svc')!;
    const outcomes = notifyOutcomes(endpoint);
    // One session sends notifications one after another, each once the one before is settled.
    for (let i = 1; i <= 4; i++) {
      a.socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'note.fire', params: [i] }));
      await waitFor(() => outcomes.length === i, `notification ${i} taken or refused`);
    }
    const heldAtUpstream = upstream.openCount();
    const bReply = await b.request('fast.echo');
    expect({ outcomes, heldAtUpstream, bReply: bReply.error ?? bReply.result }).toEqual({
      outcomes: ['taken', ...Array<string>(3).fill('busy maxConcurrentPerSession')],
      heldAtUpstream: 1,
      bReply: { ok: true },
    });
    // Its reply read to the end, the socket is free, and so are the slot and the shares.
    upstream.finish();
    await waitFor(
      () =>
        endpoint.inFlight === 0 && endpoint.addressesInFlight === 0 && endpoint.usersInFlight === 0,
      "the notification's slot and shares to be freed with its socket",
    );
  });
});

describe("a notification's slot and shares", () => {
  function clientOf(url: string): JsonRpcHttpClient {
    const client = new JsonRpcHttpClient({
      name: 'svc',
      url,
      maxConcurrent: 4,
      maxConcurrentPerSession: 1,
      maxConcurrentPerAddress: 2,
      reservedForNewCallers: 0,
      connections: 4,
      retries: 0,
      maxReplyBytes: MAX_REPLY_BYTES,
    });
    stops.unshift(() => client.close());
    return client;
  }
  const session = {};
  const options = { timeoutMs: 60_000, session, address: '127.0.0.2', user: 'ann' };

  it('are held, once it is taken, until its reply is read to the end', async () => {
    const upstream = await headersFirstUpstream();
    const client = clientOf(upstream.url);
    // Taken at its status: the notifier waits for no body.
    await expect(client.notify('note.held', [], options)).resolves.toBeUndefined();
    expect(heldBy(client, session, '127.0.0.2', 'ann')).toEqual({
      inFlight: 1,
      session: 1,
      address: 1,
      user: 1,
    });
    const refused = await client.notify('note.held', [], options).catch((err: unknown) => err);
    expect(refused).toMatchObject({
      failure: 'busy',
      data: { bound: 'maxConcurrentPerSession' },
    });
    upstream.finish();
    await waitFor(() => client.inFlight === 0, 'the slot to be freed with the socket');
    expect(heldBy(client, session, '127.0.0.2', 'ann')).toEqual({
      inFlight: 0,
      session: 0,
      address: 0,
      user: 0,
    });
    expect(client.addressesInFlight + client.usersInFlight).toBe(0);
  });

  it('are freed once its reply passes maxReplyBytes: the socket is given up, not held to read it', async () => {
    const upstream = await headersFirstUpstream();
    const client = clientOf(upstream.url);
    await expect(client.notify('note.endless', [], options)).resolves.toBeUndefined();
    // The route's timeout is a minute off: only the bytes read end the drain.
    await waitFor(
      () => client.inFlight === 0 && upstream.openCount() === 0,
      'the socket to be given up and the slot freed',
    );
    expect(heldBy(client, session, '127.0.0.2', 'ann')).toEqual({
      inFlight: 0,
      session: 0,
      address: 0,
      user: 0,
    });
  });
});
