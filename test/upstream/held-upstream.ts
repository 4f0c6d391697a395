// A JSON-RPC 2.0 upstream in this process that holds every request until the test releases it:
// what it holds at a given moment is the gateway's calls in flight to it, counted without timing.
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import type { WebSocket } from 'ws';
import type { UpstreamEndpoint } from '../../src/upstream/index.js';
import type { RawReply } from '../server/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { openSocket } from '../support/sockets.js';
import { waitFor } from '../support/waiting.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

export interface HeldRequest {
  readonly method: string;
  readonly params: Record<string, unknown>;
  readonly headers: IncomingHttpHeaders;
}

export interface HeldUpstream {
  readonly url: string;
  /** Every request received, in order (released or not). */
  readonly received: HeldRequest[];
  /** Requests waiting for their answer (a request the gateway aborted leaves). */
  readonly held: HeldRequest[];
  /** Answer every held request (or those `which` picks) with `result(request)`. */
  release(which?: (request: HeldRequest) => boolean): void;
  /** Reset the connection of every held request `which` picks (the gateway sees -32011). */
  drop(which: (request: HeldRequest) => boolean): void;
  stop(): Promise<void>;
}

/** `result` answers each released request (default: `{ ok: true }`). */
export async function startHeldUpstream(
  result: (request: HeldRequest) => unknown = () => ({ ok: true }),
): Promise<HeldUpstream> {
  const received: HeldRequest[] = [];
  const held: HeldRequest[] = [];
  const answers = new Map<HeldRequest, () => void>();
  const connections = new Map<HeldRequest, Socket>();
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const message = JSON.parse(body) as {
        id?: number;
        method: string;
        params?: Record<string, unknown>;
      };
      const request: HeldRequest = {
        method: message.method,
        params: message.params ?? {},
        headers: req.headers,
      };
      received.push(request);
      held.push(request);
      const forget = () => {
        const at = held.indexOf(request);
        if (at !== -1) held.splice(at, 1);
        answers.delete(request);
        connections.delete(request);
      };
      connections.set(request, req.socket);
      res.on('close', forget);
      answers.set(request, () => {
        forget();
        answer(res, message.id, result(request));
      });
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/rpc`,
    received,
    held,
    release(which = () => true) {
      for (const request of held.filter(which)) answers.get(request)?.();
    },
    drop(which) {
      for (const request of held.filter(which)) connections.get(request)?.destroy();
    },
    async stop() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function answer(res: ServerResponse, id: number | undefined, result: unknown): void {
  if (id === undefined) {
    res.writeHead(204).end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', id, result }));
}

/**
 * startHeldUpstream, its end (every held request answered, then the server stopped) put on
 * `cleanups` for the test's afterEach to run.
 */
export async function heldUpstreamIn(
  cleanups: (() => Promise<unknown> | void)[],
  result?: (request: HeldRequest) => unknown,
): Promise<HeldUpstream> {
  const upstream = await startHeldUpstream(result);
  cleanups.push(async () => {
    upstream.release();
    await upstream.stop();
  });
  return upstream;
}

/** Requests `upstream` holds that were sent for `user` (X-Wsrpc-User; undefined: anonymous). */
export function heldFor(upstream: HeldUpstream, user: string | undefined): number {
  return upstream.held.filter((request) => request.headers['x-wsrpc-user'] === user).length;
}

/** `reply` is -32013 Upstream busy for `upstreamName`, naming the `bound` it met and its `limit`. */
export function expectUpstreamBusy(
  reply: RawReply,
  upstreamName: string,
  bound: string,
  limit: number,
): void {
  expect(reply.error).toMatchObject({
    code: -32013,
    message: 'Upstream busy',
    data: { upstream: upstreamName, bound, limit },
  });
}

export interface LoopbackClient {
  readonly socket: WebSocket;
  /** Send a call; calls are numbered 1, 2, ... in the order sent. */
  request(method: string, params?: unknown): Promise<RawReply>;
  /** Give up the call numbered `id` (rpc.cancel). */
  cancel(id: number): void;
}

/**
 * A session of `user` (none: anonymous) on the gateway at `url` (`?user=` as startRoutedGateway
 * reads it), over a connection from the loopback address `from` (every 127/8 address is loopback
 * on Linux); `res` closes it in cleanup.
 */
export async function clientFrom(
  res: Resources,
  url: string,
  from: string,
  user?: string,
): Promise<LoopbackClient> {
  const socket = await openSocket(
    res,
    user === undefined ? url : `${url}?user=${user}`,
    undefined,
    {
      localAddress: from,
    },
  );
  const pending = new Map<number, (reply: RawReply) => void>();
  socket.on('message', (data) => {
    const reply = JSON.parse((data as Buffer).toString('utf8')) as RawReply;
    pending.get(reply.id)?.(reply);
    pending.delete(reply.id);
  });
  let nextId = 1;
  return {
    socket,
    request(method, params) {
      const id = nextId++;
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
      return new Promise((resolve) => pending.set(id, resolve));
    },
    cancel(id) {
      socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id } }));
    },
  };
}

/** A gateway whose routes reach one held upstream, for the tests of each share of an upstream. */
export interface HeldShares {
  readonly upstream: HeldUpstream;
  readonly running: RoutedGateway;
  /** The gateway's endpoint of the upstream `name`. */
  readonly endpoint: (name: string) => UpstreamEndpoint;
  /** A session of `user` (none: anonymous) over a connection from the loopback address `from`. */
  readonly sessionFrom: (from: string, user?: string) => Promise<LoopbackClient>;
  /** Requests the upstream holds that were sent for `user` (X-Wsrpc-User; undefined: anonymous). */
  readonly heldFor: (user: string | undefined) => number;
}

/**
 * For the test file that calls it (at its top level): a held upstream, and a gateway
 * (startRoutedGateway) routing `methods` to `upstreams(url)`, each of them at the held upstream's
 * url; both started before the file's tests and stopped after them. After each test every held
 * request is answered and the test's sessions closed, then each endpoint is seen to hold no call,
 * no user and no address.
 */
export function heldSharesPerFile(
  upstreams: (url: string) => Record<string, unknown>,
  methods: Record<string, unknown>,
): HeldShares {
  const res = new Resources();
  let upstream: HeldUpstream | undefined;
  let running: RoutedGateway | undefined;
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('heldSharesPerFile: read before beforeAll');
    return value;
  };
  const shares: HeldShares = {
    get upstream() {
      return started(upstream);
    },
    get running() {
      return started(running);
    },
    endpoint: (name) => started(shares.running.routes.upstreams.get(name)),
    sessionFrom: (from, user) => clientFrom(res, shares.running.url, from, user),
    heldFor: (user) => heldFor(shares.upstream, user),
  };

  beforeAll(async () => {
    upstream = await startHeldUpstream();
    running = await startRoutedGateway({ upstreams: upstreams(upstream.url), methods });
  });

  afterEach(async () => {
    shares.upstream.release();
    await res.cleanup();
    const { gateway, routes } = shares.running;
    await waitFor(() => gateway.sessions.size === 0, 'the sessions to close');
    for (const endpoint of routes.upstreams.values()) {
      await waitFor(() => endpoint.inFlight === 0, `${endpoint.name} to hold no call`);
      expect(endpoint.usersInFlight).toBe(0);
      expect(endpoint.addressesInFlight).toBe(0);
    }
  });

  afterAll(async () => {
    await running?.close();
    await upstream?.stop();
  });

  return shares;
}

/**
 * A call of `user` from `first` on `idem.get` (an idempotent route of the upstream `retrying`,
 * whose share at `bound` is 1) keeps that share between attempts: its connection reset (-32011),
 * it is sent again, and meanwhile `other` (counted at `bound` with `first`) is refused -32013 on
 * `plain.get` (a route of `retrying` that is not idempotent).
 */
export async function expectRetryKeepsShare(
  shares: HeldShares,
  first: LoopbackClient,
  other: LoopbackClient,
  user: string,
  bound: string,
): Promise<void> {
  const { upstream } = shares;
  const retried = first.request('idem.get');
  const attempts = () => upstream.received.filter((r) => r.method === 'idem.get').length;
  await waitFor(() => shares.heldFor(user) === 1, 'the first attempt to reach the upstream');
  // Its connection reset: -32011, sent again (idempotent route), the retry then held.
  upstream.drop((request) => request.method === 'idem.get');
  await waitFor(() => attempts() === 2 && shares.heldFor(user) === 1, 'the call to be sent again');
  expectUpstreamBusy(await other.request('plain.get'), 'retrying', bound, 1);
  upstream.release();
  expect((await retried).result).toEqual({ ok: true });
}
