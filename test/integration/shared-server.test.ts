/**
 * Issue 15, items 1 and 2: a gateway on a server it did not create (`createGateway({ server })`)
 * answers only its WebSocket path and its routes, and leaves every other request and upgrade to
 * the server's other listeners: an Express or Fastify app, another `ws` WebSocketServer (in
 * either listener order), another gateway. Its routes can be moved or turned off. Its socket
 * bounds apply to such a server only where the application set them. `close()` stops a server
 * that `listen()` started, and otherwise leaves the server as it found it.
 */
import { Agent, createServer, request as httpRequest } from 'node:http';
import type { IncomingMessage, Server as HttpServer } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import express from 'express';
import type { NextFunction, Request, Response } from 'express';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { createGateway } from '../../src/index.js';
import type { GatewayOptions } from '../../src/index.js';
import { silentLogger } from '../../src/peer/logger.js';
import { Resources } from '../support/resources.js';
import { closeOf, upgradeRefusal } from '../support/sockets.js';
import { sleep } from '../support/promises.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
const servers: HttpServer[] = [];
const wsServers: WebSocketServer[] = [];
const rawSockets: Socket[] = [];
const agents: Agent[] = [];

afterEach(async () => {
  for (const socket of rawSockets.splice(0)) socket.destroy();
  for (const agent of agents.splice(0)) agent.destroy();
  await res.cleanup();
  for (const wss of wsServers.splice(0)) {
    for (const client of wss.clients) client.terminate();
    wss.close();
  }
  await Promise.all(
    servers.splice(0).map(
      (server) =>
        new Promise<void>((resolve) => {
          if (!server.listening) return resolve();
          server.close(() => resolve());
          server.closeAllConnections();
        }),
    ),
  );
});

/** A gateway on `server` (tracked: closed after each test) with a `sum` and a `whoami`. */
function gatewayOn(server: HttpServer, name = 'gateway', options: GatewayOptions<unknown> = {}) {
  const gateway = createGateway({
    server,
    logger: silentLogger,
    heartbeatIntervalMs: 0,
    ...options,
  });
  gateway.method('sum', ([a, b]: [number, number]) => a + b);
  gateway.method('whoami', () => name);
  res.gateways.push(gateway);
  return gateway;
}

/** Start `server` on an ephemeral loopback port (tracked: closed after each test). */
async function listenOn(server: HttpServer): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

interface Answer {
  status: number;
  type: string;
  body: string;
}

/** One HTTP request; with `agent`, on its kept-alive connections. */
function send(
  port: number,
  path: string,
  options: { method?: string; body?: string; agent?: Agent; type?: string } = {},
): Promise<Answer> {
  const { method = options.body === undefined ? 'GET' : 'POST', body, agent } = options;
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        agent,
        headers: body === undefined ? {} : { 'content-type': options.type ?? 'application/json' },
      },
      (response) => {
        let text = '';
        response.on('error', reject);
        response.on('close', () => {
          if (!response.complete) reject(new Error('the response was cut'));
        });
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            type: String(response.headers['content-type'] ?? ''),
            body: text,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function keepAlive(): Agent {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  agents.push(agent);
  return agent;
}

const call = (method: string, params: unknown, id = 1): string =>
  JSON.stringify({ jsonrpc: '2.0', method, params, id });

/** A JSON-RPC call over HTTP POST: the result, or the whole answer when it has none. */
async function postCall(port: number, path: string, method: string, params: unknown) {
  const answer = await send(port, path, { body: call(method, params) });
  expect(answer.status, answer.body).toBe(200);
  return (JSON.parse(answer.body) as { result: unknown }).result;
}

/** A JSON-RPC call over the gateway's WebSocket. */
async function wsCall(port: number, path: string, method: string, params: unknown) {
  const client = res.client(`ws://127.0.0.1:${port}${path}`, { reconnect: false });
  return client.call(method, params as never);
}

function pathOf(req: IncomingMessage): string {
  return (req.url ?? '/').split('?', 1)[0]!;
}

/**
 * Another WebSocket endpoint on `path` of `server`, echoing each message: a `ws` server in its
 * own `{ server, path }` mode, or in noServer mode behind an 'upgrade' listener that takes its
 * own path only (as graphql-ws, Vite's HMR and the `ws` docs' recipe do).
 */
function echoEndpoint(server: HttpServer, path: string, mode: 'server' | 'noServer') {
  const wss =
    mode === 'server'
      ? new WebSocketServer({ server, path })
      : new WebSocketServer({ noServer: true });
  wsServers.push(wss);
  wss.on('connection', (ws) =>
    ws.on('message', (data) => ws.send(`echo:${(data as Buffer).toString()}`)),
  );
  if (mode === 'noServer') {
    server.on('upgrade', (req: IncomingMessage, socket, head) => {
      if (pathOf(req) !== path) return;
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
    });
  }
  return wss;
}

/**
 * The echo endpoint works: a message comes back, the socket stays open (nothing else was written
 * into it: a 404 there is an invalid frame, then 1006) and closes cleanly with 1000.
 */
async function echoes(url: string, localAddress?: string): Promise<void> {
  const socket = res.track(new WebSocket(url, localAddress ? { localAddress } : {}));
  const errors: Error[] = [];
  socket.on('error', (err) => errors.push(err));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('close', (code) => reject(new Error(`closed with ${code} before opening`)));
  });
  const closed = closeOf(socket);
  const reply = new Promise<string>((resolve, reject) => {
    socket.once('message', (data) => resolve((data as Buffer).toString()));
    const why = () => errors.map((err) => err.message).join('; ');
    socket.once('close', (code) => reject(new Error(`closed with ${code} (${why()})`)));
  });
  socket.send('ping');
  expect(await reply).toBe('echo:ping');
  await sleep(50);
  expect(socket.readyState).toBe(WebSocket.OPEN);
  socket.close(1000);
  expect((await closed).code).toBe(1000);
  expect(errors).toEqual([]);
}

/** An Express 5 app with routes of its own, a JSON body parser, a 404 handler and an error handler. */
function expressApp() {
  const app = express();
  app.use(express.json());
  app.get('/api/hello', (_req, response) => {
    response.json({ hello: 'world' });
  });
  app.post('/api/echo', (req, response) => {
    response.json({ echo: req.body as unknown });
  });
  app.get('/api/slow', async (_req, response) => {
    await sleep(100);
    response.json({ slow: true });
  });
  app.get('/api/boom', () => {
    throw new Error('boom');
  });
  app.use((req, response) => {
    response.status(404).json({ error: 'no such route', path: req.path });
  });
  app.use((err: Error, _req: Request, response: Response, _next: NextFunction) => {
    response.status(500).json({ error: err.message });
  });
  return app;
}

/** The application's routes and the gateway's, many times over one kept-alive connection. */
async function mixedTraffic(port: number, rounds: number): Promise<void> {
  const agent = keepAlive();
  for (let i = 0; i < rounds; i++) {
    const hello = await send(port, '/api/hello', { agent });
    expect(hello).toMatchObject({ status: 200, body: '{"hello":"world"}' });
    const echo = await send(port, '/api/echo', { agent, body: JSON.stringify({ i }) });
    expect(echo).toMatchObject({ status: 200, body: JSON.stringify({ echo: { i } }) });
    const livez = await send(port, '/livez', { agent });
    expect(livez).toMatchObject({ status: 200, body: '{"status":"ok"}' });
    const missing = await send(port, `/missing/${i}`, { agent });
    expect(missing.status).toBe(404);
    expect(missing.body).not.toBe('Not found\n'); // the application's 404, not the gateway's
    const rpc = await send(port, '/rpc', { agent, body: call('sum', [i, 1], i) });
    expect(rpc).toMatchObject({
      status: 200,
      body: `{"jsonrpc":"2.0","result":${i + 1},"id":${i}}`,
    });
  }
}

describe('an Express 5 app on the same server', () => {
  it.each(['before', 'after'] as const)(
    "with the app's listener attached %s the gateway: both serve their own, many requests in a row",
    async (order) => {
      const app = expressApp();
      const server = order === 'before' ? createServer(app) : createServer();
      const gateway = gatewayOn(server);
      if (order === 'after') server.on('request', app);
      const port = await listenOn(server);

      // The gateway: WebSocket, POST, health, metrics.
      expect(await wsCall(port, '/rpc', 'sum', [1, 2])).toBe(3);
      expect(await postCall(port, '/rpc', 'sum', [2, 3])).toBe(5);
      const ready = await send(port, '/readyz');
      expect(ready.status).toBe(200);
      expect(JSON.parse(ready.body)).toMatchObject({ status: 'ready' });
      const metrics = await send(port, '/metrics');
      expect(metrics.status).toBe(200);
      expect(metrics.body).toContain('rpc_connections');
      expect((await send(port, '/rpc')).status).toBe(426);

      // The app: its routes, its body parser, its 404 and its error handler.
      expect(await send(port, '/api/hello')).toMatchObject({ status: 200 });
      expect(await send(port, '/api/slow')).toMatchObject({ status: 200, body: '{"slow":true}' });
      expect(await send(port, '/nope')).toMatchObject({
        status: 404,
        body: '{"error":"no such route","path":"/nope"}',
      });
      expect(await send(port, '/api/boom')).toMatchObject({
        status: 500,
        body: '{"error":"boom"}',
      });
      await mixedTraffic(port, 30);
      expect(gateway.isReady).toBe(true);
    },
  );
});

describe('a Fastify 5 app on the same server', () => {
  it('both serve their own; fastify.close() with a preClose hook closes the gateway and the server', async () => {
    const fastify = Fastify();
    fastify.get('/api/hello', () => ({ hello: 'world' }));
    fastify.post('/api/echo', (request) => ({ echo: request.body }));
    fastify.get('/api/boom', () => {
      throw new Error('boom');
    });
    fastify.setNotFoundHandler((request, reply) =>
      reply.status(404).send({ error: 'no such route', path: request.url }),
    );
    fastify.setErrorHandler((err: Error, _request, reply) =>
      reply.status(500).send({ error: err.message }),
    );
    const gateway = gatewayOn(fastify.server);
    // A close timeout that never fires within the test: the server closing cannot be a wait for
    // it (the gateway cutting sessions that did not finish the closing handshake).
    fastify.addHook('preClose', () => gateway.close({ timeoutMs: 2 ** 31 - 1 }));
    await fastify.listen({ port: 0, host: '127.0.0.1' });
    const { port } = fastify.server.address() as AddressInfo;
    servers.push(fastify.server);

    const client = res.client(`ws://127.0.0.1:${port}/rpc`, { reconnect: false });
    expect(await client.call('sum', [1, 2])).toBe(3);
    expect(await postCall(port, '/rpc', 'sum', [2, 3])).toBe(5);
    expect(await send(port, '/readyz')).toMatchObject({ status: 200 });
    expect(await send(port, '/nope')).toMatchObject({
      status: 404,
      body: '{"error":"no such route","path":"/nope"}',
    });
    expect(await send(port, '/api/boom')).toMatchObject({ status: 500, body: '{"error":"boom"}' });
    await mixedTraffic(port, 30);

    // The session is closed by the gateway (1001), so the server closes at once.
    await fastify.close();
    expect(fastify.server.listening).toBe(false);
    expect(gateway.sessions.size).toBe(0);
  });
});

describe('another WebSocket endpoint on the same server', () => {
  describe.each(['server', 'noServer'] as const)('a ws WebSocketServer in %s mode', (mode) => {
    it.each(['before', 'after'] as const)(
      'attached %s the gateway: both endpoints work, neither writes into the other',
      async (order) => {
        const server = createServer();
        if (order === 'before') echoEndpoint(server, '/other', mode);
        gatewayOn(server);
        if (order === 'after') echoEndpoint(server, '/other', mode);
        const port = await listenOn(server);

        for (let i = 0; i < 3; i++) {
          await echoes(`ws://127.0.0.1:${port}/other`);
          expect(await wsCall(port, '/rpc', 'sum', [i, 1])).toBe(i + 1);
        }
        // The gateway's plain routes still work (ws answers no plain request).
        expect(await send(port, '/livez')).toMatchObject({ status: 200 });
        expect(await postCall(port, '/rpc', 'sum', [2, 3])).toBe(5);
      },
    );
  });

  it("an upgrade that no listener takes is left alone when another 'upgrade' listener exists, answered 404 when there is none", async () => {
    const server = createServer();
    gatewayOn(server);
    const port = await listenOn(server);
    // The gateway's is the only 'upgrade' listener: nobody else can take it.
    expect((await upgradeRefusal(res, `ws://127.0.0.1:${port}/nowhere`)).status).toBe(404);

    // Another listener exists: the gateway writes nothing, destroys nothing; it is that
    // listener's socket to answer (here, late).
    server.on('upgrade', (req: IncomingMessage, socket) => {
      if (pathOf(req) === '/late') setTimeout(() => socket.end('HTTP/1.1 418 Teapot\r\n\r\n'), 200);
    });
    const socket = connect(port, '127.0.0.1');
    rawSockets.push(socket);
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(
      'GET /late HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    await closed;
    expect(received).toBe('HTTP/1.1 418 Teapot\r\n\r\n');
  });
});

describe('two gateways on one server', () => {
  it('each serves its own clients and routes; the second has its health routes moved or off', async () => {
    const server = createServer();
    const a = gatewayOn(server, 'a', { path: '/a' });
    const b = gatewayOn(server, 'b', {
      path: '/b',
      routes: { livez: '/b/livez', readyz: '/b/readyz', metrics: false, openrpc: false },
    });
    const port = await listenOn(server);

    for (let i = 0; i < 3; i++) {
      expect(await wsCall(port, '/a', 'whoami', [])).toBe('a');
      expect(await wsCall(port, '/b', 'whoami', [])).toBe('b');
      expect(await postCall(port, '/a', 'whoami', [])).toBe('a');
      expect(await postCall(port, '/b', 'whoami', [])).toBe('b');
    }
    const clientOfB = res.client(`ws://127.0.0.1:${port}/b`, { reconnect: false });
    await clientOfB.opened();
    // Each readiness route counts its own gateway's sessions.
    expect(a.sessions.size).toBe(3);
    expect(b.sessions.size).toBe(4);
    expect(JSON.parse((await send(port, '/readyz')).body)).toEqual({
      status: 'ready',
      sessions: 3,
    });
    expect(JSON.parse((await send(port, '/b/readyz')).body)).toEqual({
      status: 'ready',
      sessions: 4,
    });
    expect(await send(port, '/b/livez')).toMatchObject({ status: 200 });
    expect(await send(port, '/metrics')).toMatchObject({ status: 200 }); // a's
    // Nobody else listens on this server: what neither takes is 404.
    expect((await send(port, '/elsewhere')).status).toBe(404);
    expect((await upgradeRefusal(res, `ws://127.0.0.1:${port}/c`)).status).toBe(404);

    // A third one on the same paths is refused, naming what is taken.
    expect(() => createGateway({ server, path: '/a', logger: silentLogger })).toThrow(
      /another gateway on this server answers path "\/a" \(its path\), routes\.livez "\/livez"/,
    );
    expect(() =>
      createGateway({ server, path: '/c', routes: { metrics: '/b/livez' }, logger: silentLogger }),
    ).toThrow(RangeError);

    // Closing a leaves b serving; a's paths are nobody's now.
    await a.close();
    expect(await wsCall(port, '/b', 'whoami', [])).toBe('b');
    expect((await send(port, '/livez')).status).toBe(404);
    expect((await send(port, '/a', { body: call('whoami', []) })).status).toBe(404);
    await b.close();
    // The server is as it was found.
    expect(server.listenerCount('request')).toBe(0);
    expect(server.listenerCount('upgrade')).toBe(0);
    expect(Object.hasOwn(server, 'emit')).toBe(false);
    expect(server.listening).toBe(true);
  });
});

describe('close() on a server the gateway was given', () => {
  it('a server the application started: left listening, with its own listeners only', async () => {
    const app = expressApp();
    const server = createServer(app);
    const headersTimeout = server.headersTimeout;
    const connectionListeners = server.listeners('connection'); // Node's own
    const gateway = gatewayOn(server, 'gateway', { limits: { maxHttpSocketsPerIp: 50 } });
    const port = await listenOn(server);
    expect(await wsCall(port, '/rpc', 'sum', [1, 2])).toBe(3);
    await gateway.close();

    expect(server.listening).toBe(true);
    expect(server.listeners('request')).toEqual([app]);
    expect(server.listenerCount('upgrade')).toBe(0);
    expect(server.listeners('connection')).toEqual(connectionListeners);
    expect(Object.hasOwn(server, 'emit')).toBe(false);
    expect(server.headersTimeout).toBe(headersTimeout);
    expect(await send(port, '/api/hello')).toMatchObject({ status: 200 });
    // The gateway's routes are the application's paths again.
    expect(await send(port, '/livez')).toMatchObject({
      status: 404,
      body: '{"error":"no such route","path":"/livez"}',
    });
  });

  it('a server gateway.listen() started: stopped, letting requests under way finish', async () => {
    const server = createServer(expressApp());
    servers.push(server);
    const gateway = gatewayOn(server);
    const { port } = await gateway.listen(0, '127.0.0.1');
    const client = res.client(`ws://127.0.0.1:${port}/rpc`, { reconnect: false });
    expect(await client.call('sum', [1, 2])).toBe(3);
    const slow = send(port, '/api/slow');
    await sleep(20);
    await gateway.close();
    expect(await slow).toMatchObject({ status: 200, body: '{"slow":true}' });
    expect(server.listening).toBe(false);
  });

  it('a server gateway.listen() started: a request that never ends is cut after timeoutMs', async () => {
    let underWay: Socket | undefined;
    const server = createServer((req, response) => {
      if (req.url !== '/forever') return;
      underWay = req.socket;
      response.writeHead(200).write('started');
    });
    servers.push(server);
    const gateway = gatewayOn(server);
    const { port } = await gateway.listen(0, '127.0.0.1');
    const forever = send(port, '/forever').then(
      () => 'ended',
      () => 'cut',
    );
    await waitUntil(() => underWay !== undefined, 'the request under way');
    // Which timer cuts it, by the order of timers (kept whatever the load): the gateway starts
    // its timeoutMs timer just before it calls server.close(); timers started there see the
    // request still open at half of timeoutMs, and cut at timeoutMs (a timer of the same length
    // started after it fires after it).
    const seen: Record<string, boolean> = {};
    const close = server.close.bind(server);
    server.close = (callback) => {
      setTimeout(() => (seen['half'] = underWay!.destroyed), 150);
      setTimeout(() => (seen['full'] = underWay!.destroyed), 300);
      return close(callback);
    };
    await gateway.close({ timeoutMs: 300 });
    expect(server.listening).toBe(false);
    expect(await forever).toBe('cut');
    await waitUntil(() => 'full' in seen, 'the timer as long as timeoutMs');
    expect(seen).toEqual({ half: false, full: true });
  });
});

describe('routes: moved, or turned off', () => {
  it('on its own server: the moved routes answer, the old paths and the turned-off ones are 404', async () => {
    const { httpUrl, gateway, port } = await res.gateway({
      routes: {
        livez: '/healthz',
        readyz: '/ready',
        metrics: false,
        openrpc: '/docs/openrpc.json',
      },
    });
    gateway.serveDiscovery({ openrpc: '1.2.6', info: { title: 't', version: '1' }, methods: [] });
    for (const [path, status] of [
      ['/healthz', 200],
      ['/ready', 200],
      ['/docs/openrpc.json', 200],
      ['/livez', 404],
      ['/readyz', 404],
      ['/metrics', 404],
      ['/openrpc.json', 404],
    ] as const) {
      const response = await fetch(`${httpUrl}${path}`);
      expect(response.status, path).toBe(status);
      await response.arrayBuffer();
    }
    expect((await send(port, '/docs/openrpc.json')).body).toContain('"openrpc":"1.2.6"');
  });

  it('JSON-RPC over POST on a path of its own, or off', async () => {
    const moved = await res.gateway({ routes: { rpc: '/jsonrpc' } });
    moved.gateway.method('sum', ([a, b]: [number, number]) => a + b);
    expect(await postCall(moved.port, '/jsonrpc', 'sum', [1, 2])).toBe(3);
    expect((await send(moved.port, '/jsonrpc')).status).toBe(405);
    expect((await send(moved.port, '/rpc')).status).toBe(426);
    expect((await send(moved.port, '/rpc', { body: call('sum', [1, 2]) })).status).toBe(405);

    const off = await res.gateway({ routes: { rpc: false } });
    expect((await send(off.port, '/rpc', { body: call('sum', [1, 2]) })).status).toBe(405);
    expect((await send(off.port, '/rpc')).status).toBe(426);
  });

  it("on a shared server, a turned-off route is the application's", async () => {
    const server = createServer(expressApp());
    gatewayOn(server, 'gateway', { routes: { livez: false, rpc: false }, metrics: false });
    const port = await listenOn(server);
    for (const path of ['/livez', '/metrics']) {
      expect(await send(port, path)).toMatchObject({
        status: 404,
        body: `{"error":"no such route","path":"${path}"}`,
      });
    }
    // Only the upgrade on the WebSocket path is the gateway's: plain requests there the app's.
    expect(await send(port, '/rpc', { body: call('sum', [1, 2]) })).toMatchObject({
      status: 404,
      body: '{"error":"no such route","path":"/rpc"}',
    });
    expect(await wsCall(port, '/rpc', 'sum', [1, 2])).toBe(3);
  });

  it('are checked when the gateway is made: a TypeError or RangeError naming the option', () => {
    const make = (options: GatewayOptions<unknown>) => () =>
      createGateway({ logger: silentLogger, ...options });
    expect(make({ routes: { livez: 'livez' } })).toThrow(
      new RangeError('routes.livez must start with "/", not "livez"'),
    );
    expect(make({ routes: { readyz: '/ready?x=1' } })).toThrow(RangeError);
    expect(make({ routes: { livez: 3 as unknown as string } })).toThrow(
      new TypeError('routes.livez must be a path such as "/livez", or false, not 3'),
    );
    expect(make({ routes: { livez: true as unknown as string } })).toThrow(TypeError);
    expect(make({ routes: { health: '/h' } as never })).toThrow(
      new TypeError(
        'routes.health is not a route of the gateway (livez, readyz, metrics, openrpc, rpc, events)',
      ),
    );
    expect(make({ routes: '/livez' as never })).toThrow(TypeError);
    expect(make({ routes: { readyz: '/livez' } })).toThrow(
      /^routes\.readyz "\/livez" is already routes\.livez/,
    );
    expect(make({ routes: { metrics: '/rpc' } })).toThrow(
      /^routes\.metrics "\/rpc" is already the WebSocket path \(path\)/,
    );
    expect(make({ path: 'rpc' })).toThrow(new RangeError('path must start with "/", not "rpc"'));
    expect(make({ path: 5 as unknown as string })).toThrow(TypeError);
    // The defaults, and rpc on the WebSocket's path, are fine.
    expect(make({ routes: { rpc: '/rpc' } })).not.toThrow();
  });
});

/** A TCP connection from `localAddress` that writes `text` and then waits. */
async function idleSocket(port: number, localAddress: string, text = '') {
  const socket = connect({ port, host: '127.0.0.1', localAddress });
  rawSockets.push(socket);
  socket.on('error', () => undefined);
  let closed = false;
  socket.once('close', () => (closed = true));
  await new Promise<void>((resolve) =>
    socket.once('connect', () => {
      if (text) socket.write(text);
      resolve();
    }),
  );
  return { socket, isClosed: () => closed };
}

describe('the socket bounds before a byte is read, on a server the gateway was given', () => {
  it("apply none by default: the application's sockets are not counted, timed or cut, its headersTimeout is its own", async () => {
    const server = createServer(expressApp());
    server.headersTimeout = 45_000;
    gatewayOn(server);
    const port = await listenOn(server);
    expect(server.headersTimeout).toBe(45_000);
    // More than maxHttpSocketsPerIp (200) idle sockets from one address: none is cut.
    const idle = [];
    for (let i = 0; i < 210; i++) idle.push(await idleSocket(port, '127.0.0.7'));
    await sleep(100);
    expect(idle.filter((s) => s.isClosed())).toHaveLength(0);
    expect(await send(port, '/api/hello')).toMatchObject({ status: 200 });
    expect(await wsCall(port, '/rpc', 'sum', [1, 2])).toBe(3);
  });

  it("apply those the application set, each on its own; another endpoint's WebSockets leave the count", async () => {
    const server = createServer(expressApp());
    server.headersTimeout = 45_000;
    gatewayOn(server, 'gateway', { limits: { maxHttpSocketsPerIp: 3 } });
    echoEndpoint(server, '/other', 'noServer');
    const port = await listenOn(server);
    expect(server.headersTimeout).toBe(45_000); // headersTimeoutMs was not set

    // Five WebSockets of the other endpoint from one address: each leaves the count once upgraded.
    const open: WebSocket[] = [];
    for (let i = 0; i < 5; i++) {
      const socket = res.track(
        new WebSocket(`ws://127.0.0.1:${port}/other`, { localAddress: '127.0.0.8' }),
      );
      await new Promise<void>((resolve, reject) => {
        socket.once('open', () => resolve());
        socket.once('error', reject);
      });
      open.push(socket);
    }
    await echoes(`ws://127.0.0.1:${port}/other`, '127.0.0.8');
    expect(open.every((socket) => socket.readyState === WebSocket.OPEN)).toBe(true);

    // HTTP sockets from one address are bounded (3): the fourth is cut at once.
    const held = [];
    for (let i = 0; i < 3; i++)
      held.push(await idleSocket(port, '127.0.0.9', 'GET /api/hello HTTP/1.1\r\n'));
    const fourth = await idleSocket(port, '127.0.0.9');
    await sleep(200);
    expect(fourth.isClosed()).toBe(true);
    // No headers timer was asked for: the half-sent requests are still open.
    expect(held.filter((s) => s.isClosed())).toHaveLength(0);
  });

  it("headersTimeoutMs, when set, times the first request of every socket and lowers the server's headersTimeout until close", async () => {
    const server = createServer(expressApp());
    server.headersTimeout = 45_000;
    const gateway = gatewayOn(server, 'gateway', { limits: { headersTimeoutMs: 300 } });
    const port = await listenOn(server);
    expect(server.headersTimeout).toBe(300);
    const half = await idleSocket(port, '127.0.0.10', 'GET /api/hello HTTP/1.1\r\n');
    await sleep(800);
    expect(half.isClosed()).toBe(true);
    await gateway.close();
    expect(server.headersTimeout).toBe(45_000);
  });
});
