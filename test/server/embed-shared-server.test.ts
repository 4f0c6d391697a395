/**
 * A gateway attached to an application's server, and other endpoints attached to a server a
 * gateway made: the application answers its own requests however and whenever it does (async
 * handlers, body parsers, socket.io's engine.io taking over the 'request' listeners), including
 * after `gateway.close()`; a route turned off (`routes.rpc: false`) is the application's path; an
 * `Upgrade: h2c` request to the application is the plain request Node would give it without a
 * gateway; and what nobody takes is answered 404 only where nobody else listens, whichever copy
 * of this package is attached.
 */
import { createServer, request as httpRequest } from 'node:http';
import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import express from 'express';
import { Server as IoServer } from 'socket.io';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { createGateway } from '../../src/index.js';
import type { GatewayOptions } from '../../src/index.js';
import * as dispatch from '../../src/server/http-dispatch.js';
import type { ServerTenant } from '../../src/server/http-dispatch.js';
import { rejectUpgrade } from '../../src/server/upgrade-rejection.js';
import { silentLogger } from '../../src/peer/logger.js';
import { Resources } from '../support/resources.js';
import { sleep } from '../support/promises.js';
import { waitUntil, within } from '../support/waiting.js';

const res = new Resources();
const servers: HttpServer[] = [];
const ioServers: IoServer[] = [];
const wsServers: WebSocketServer[] = [];
const rawSockets: Socket[] = [];

afterEach(async () => {
  for (const socket of rawSockets.splice(0)) socket.destroy();
  await res.cleanup();
  for (const io of ioServers.splice(0)) io.engine.close();
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

/** A gateway on `server` (closed after each test) with a `sum`. */
function gatewayOn(server: HttpServer, options: GatewayOptions<unknown> = {}) {
  const gateway = createGateway({
    server,
    logger: silentLogger,
    heartbeatIntervalMs: 0,
    ...options,
  });
  gateway.method('sum', ([a, b]: [number, number]) => a + b);
  res.gateways.push(gateway);
  return gateway;
}

async function listenOn(server: HttpServer): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

interface Answer {
  status: number;
  body: string;
}

/** One HTTP request on a connection of its own; rejects when no answer comes within 3 s. */
function send(
  port: number,
  path: string,
  options: { method?: string; body?: string } = {},
): Promise<Answer> {
  const { method = options.body === undefined ? 'GET' : 'POST', body } = options;
  const answer = new Promise<Answer>((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        agent: false,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
        response.on('error', reject);
      },
    );
    req.on('error', reject);
    req.setTimeout(3_000, () => req.destroy(new Error(`no answer to ${method} ${path}`)));
    req.end(body);
  });
  return within(answer, `${method} ${path}`, 5_000);
}

const call = (method: string, params: unknown): string =>
  JSON.stringify({ jsonrpc: '2.0', method, params, id: 1 });

async function wsCall(port: number, method: string, params: unknown): Promise<unknown> {
  const client = res.client(`ws://127.0.0.1:${port}/rpc`, { reconnect: false });
  return client.call(method, params as never);
}

/**
 * An Express 5 app: a JSON body parser, handlers that answer after an await, routes of its own on
 * `/rpc` (the gateway's path, the app's when the gateway's POST route is off) and a 404 handler.
 */
function expressApp() {
  const app = express();
  app.use(express.json());
  app.post('/api/echo', (req, response) => {
    response.json({ echo: req.body as unknown });
  });
  app.get('/api/slow', async (_req, response) => {
    await sleep(50);
    response.json({ slow: true });
  });
  app.get('/api/hello', (_req, response) => {
    response.json({ hello: 'world' });
  });
  app.post('/rpc', (req, response) => {
    response.json({ app: req.body as unknown });
  });
  app.get('/rpc', (_req, response) => {
    response.send('the app at /rpc');
  });
  app.use((req, response) => {
    response.status(404).json({ error: 'no such route', path: req.path });
  });
  return app;
}

/** The app's own routes answer as the app does. */
async function appAnswers(port: number): Promise<void> {
  expect(await send(port, '/api/echo', { body: '{"a":1}' })).toEqual({
    status: 200,
    body: '{"echo":{"a":1}}',
  });
  expect(await send(port, '/api/slow')).toEqual({ status: 200, body: '{"slow":true}' });
  expect(await send(port, '/nope')).toEqual({
    status: 404,
    body: '{"error":"no such route","path":"/nope"}',
  });
}

describe('socket.io on the same server (its engine.io takes the server\'s "request" listeners)', () => {
  it.each(['after', 'before'] as const)(
    'attached %s the gateway: the app answers its POSTs and its async handlers, during and after the gateway',
    async (order) => {
      const server = createServer(expressApp());
      if (order === 'before') ioServers.push(new IoServer(server));
      const gateway = gatewayOn(server);
      if (order === 'after') ioServers.push(new IoServer(server));
      const port = await listenOn(server);

      await appAnswers(port);
      const polling = await send(port, '/socket.io/?EIO=4&transport=polling');
      expect(polling.status).toBe(200);
      expect(polling.body).toMatch(/^0\{"sid":/);
      expect(await send(port, '/rpc', { body: call('sum', [1, 2]) })).toEqual({
        status: 200,
        body: '{"jsonrpc":"2.0","result":3,"id":1}',
      });
      expect(await wsCall(port, 'sum', [2, 3])).toBe(5);
      expect((await send(port, '/livez')).status).toBe(200);

      await gateway.close();
      await appAnswers(port);
      // The gateway's paths are the app's again.
      expect(await send(port, '/livez')).toEqual({
        status: 404,
        body: '{"error":"no such route","path":"/livez"}',
      });
    },
  );
});

describe('endpoints attached to a server the gateway made', () => {
  it("a 'request' listener answers its requests, late or not; the gateway's routes are still its own", async () => {
    const { gateway, port } = await res.gateway();
    gateway.httpServer.on('request', (req: IncomingMessage, response: ServerResponse) => {
      if (req.url === '/app') setTimeout(() => response.end('the app'), 30);
    });
    expect(await send(port, '/app')).toEqual({ status: 200, body: 'the app' });
    expect((await send(port, '/livez')).status).toBe(200);
  });

  it('a ws WebSocketServer in { server, path } mode: its clients connect, nothing is written into them', async () => {
    const { gateway, port } = await res.gateway();
    const wss = new WebSocketServer({ server: gateway.httpServer, path: '/other' });
    wsServers.push(wss);
    wss.on('connection', (ws) =>
      ws.on('message', (data) => ws.send(`echo:${(data as Buffer).toString()}`)),
    );
    const socket = res.track(new WebSocket(`ws://127.0.0.1:${port}/other`));
    const errors: string[] = [];
    socket.on('error', (err) => errors.push(err.message));
    await within(
      new Promise<void>((resolve, reject) => {
        socket.once('open', () => resolve());
        socket.once('close', (code) => reject(new Error(`closed with ${code}`)));
      }),
      'the other endpoint to open',
    );
    const reply = new Promise<string>((resolve) =>
      socket.once('message', (data) => resolve((data as Buffer).toString())),
    );
    socket.send('ping');
    expect(await within(reply, 'the echo')).toBe('echo:ping');
    await sleep(50);
    expect(socket.readyState).toBe(WebSocket.OPEN);
    expect(errors).toEqual([]);
  });
});

describe('two copies of this package on one bare server (two hubs)', () => {
  /**
   * A stand-in for a gateway: answers GET `path`, its httpHandler `late` after a while, and
   * refuses upgrades nobody takes with 404.
   */
  function tenant(path: string, late?: string): ServerTenant {
    return {
      ownsServer: false,
      paths: new Map([[path, 'path']]),
      route: (req) => (dispatch.pathOf(req.url) === path ? 'livez' : undefined),
      serve: (_req, response) => void response.end(`tenant ${path}`),
      takesUpgrade: () => false,
      upgrade: () => undefined,
      headersRead: () => undefined,
      other: async (req, response) => {
        if (late === undefined || req.url !== late) return false;
        await sleep(30);
        response.end(`handler ${late}`);
        return true;
      },
      refuseUpgrade: (socket) => rejectUpgrade(socket, 404),
    };
  }

  it('what neither takes is answered 404, once; each answers its own', async () => {
    // The same module under another URL is a module instance of its own, as a second copy is.
    const url = '../../src/server/http-dispatch.js?second-copy';
    const copy = (await import(url)) as typeof dispatch;
    expect(copy.joinServer).not.toBe(dispatch.joinServer);
    const server = createServer();
    const leaveFirst = dispatch.joinServer(server, tenant('/a'));
    const leaveSecond = copy.joinServer(server, tenant('/b', '/late'));
    const port = await listenOn(server);

    expect(await send(port, '/a')).toEqual({ status: 200, body: 'tenant /a' });
    expect(await send(port, '/b')).toEqual({ status: 200, body: 'tenant /b' });
    expect(await send(port, '/nope')).toEqual({ status: 404, body: 'Not found\n' });
    // The second copy's httpHandler is waited for by the first, which finds no listener.
    expect(await send(port, '/late')).toEqual({ status: 200, body: 'handler /late' });

    const socket = connect(port, '127.0.0.1');
    rawSockets.push(socket);
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(
      'GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    await within(closed, 'the refused upgrade to close');
    expect(received).toMatch(/^HTTP\/1\.1 404 /);
    expect(received.match(/HTTP\/1\.1 /g)).toHaveLength(1);

    leaveSecond();
    leaveFirst();
    expect(server.listenerCount('request')).toBe(0);
    expect(server.listenerCount('upgrade')).toBe(0);
    expect(Object.hasOwn(server, 'emit')).toBe(false);
  });
});

describe('routes.rpc off', () => {
  it("on a shared server, plain requests to the WebSocket path are the application's", async () => {
    const server = createServer(expressApp());
    gatewayOn(server, { routes: { rpc: false } });
    const port = await listenOn(server);
    expect(await send(port, '/rpc', { body: '{"x":1}' })).toEqual({
      status: 200,
      body: '{"app":{"x":1}}',
    });
    expect(await send(port, '/rpc')).toEqual({ status: 200, body: 'the app at /rpc' });
    // The upgrade is still the gateway's.
    expect(await wsCall(port, 'sum', [1, 2])).toBe(3);
  });

  it('on its own server, httpHandler sees them first; the upgrade hint answers what it declines', async () => {
    const { port } = await res.gateway({
      routes: { rpc: false },
      httpHandler: (req, response) => {
        if (req.method !== 'PUT') return false;
        response.end('the handler');
        return true;
      },
    });
    expect(await send(port, '/rpc', { method: 'PUT' })).toEqual({
      status: 200,
      body: 'the handler',
    });
    expect((await send(port, '/rpc')).status).toBe(426);
    expect((await send(port, '/rpc', { body: call('sum', [1, 2]) })).status).toBe(405);
    expect((await send(port, '/elsewhere')).status).toBe(404);
  });
});

describe("an Upgrade to another protocol (h2c) on the application's paths", () => {
  const H2C =
    'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n';

  it('is the plain request Node gives the app without a gateway: chunked bodies read, the connection kept alive', async () => {
    const app = expressApp();
    let seenUpgrade: string | undefined;
    const server = createServer((req, response) => {
      seenUpgrade = req.headers.upgrade;
      app(req, response);
    });
    gatewayOn(server);
    const port = await listenOn(server);

    const socket = connect(port, '127.0.0.1');
    rawSockets.push(socket);
    let received = '';
    let closed = false;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.once('close', () => (closed = true));
    socket.write(
      `POST /api/echo HTTP/1.1\r\nHost: x\r\n${H2C}Content-Type: application/json\r\n` +
        'Transfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n',
    );
    await sleep(20);
    socket.write('3\r\n:1}\r\n0\r\n\r\n');
    await waitUntil(
      () => received.includes('{"echo":{"a":1}}') || closed,
      'the answer to the chunked POST',
      3_000,
    );
    expect(received).toMatch(/^HTTP\/1\.1 200 /);
    expect(received).toContain('{"echo":{"a":1}}');
    expect(received.toLowerCase()).not.toContain('connection: close');
    expect(seenUpgrade).toBe('h2c');

    // The same connection serves the next request.
    received = '';
    socket.write(`GET /api/hello HTTP/1.1\r\nHost: x\r\n${H2C}\r\n`);
    await waitUntil(
      () => received.includes('{"hello":"world"}') || closed,
      'the answer on the same connection',
      3_000,
    );
    expect(received).toMatch(/^HTTP\/1\.1 200 /);
    expect(closed).toBe(false);
    // Node's server counts it among its connections again: idle, it is closed with the others.
    server.closeIdleConnections();
    await waitUntil(() => closed, 'the idle connection to close', 3_000);
  });
});
