import { connect as netConnect } from 'node:net';
import type { Socket } from 'node:net';
import { firstValueFrom } from 'rxjs';
import { WebSocket, WebSocketServer } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { HEARTBEAT_CLOSE_CODE } from '../../src/client/client.js';
import type { Session } from '../../src/index.js';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import { Resources } from '../support/resources.js';
import { closeOf } from '../support/sockets.js';
import { recordStates, waitForState } from '../support/client.js';
import { waitUntil, within } from '../support/waiting.js';
import { openSocket } from '../support/sockets.js';

const res = new Resources();
const servers: WebSocketServer[] = [];
afterEach(async () => {
  await res.cleanup();
  await Promise.all(
    servers.splice(0).map(
      (wss) =>
        new Promise<void>((resolve) => {
          for (const client of wss.clients) client.terminate();
          wss.close(() => resolve());
        }),
    ),
  );
});

/** Resolves once `socket` has received `count` pings in total. */
function pingCounter(socket: WebSocket): {
  count: () => number;
  reach: (n: number) => Promise<void>;
} {
  let pings = 0;
  const waiters: { n: number; resolve: () => void }[] = [];
  socket.on('ping', () => {
    pings++;
    for (const w of waiters.filter((w) => pings >= w.n)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  });
  return {
    count: () => pings,
    reach: (n) =>
      pings >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve })),
  };
}

describe('server heartbeat', () => {
  it('terminates a client that does not answer pings (1006) while a normal client stays across several intervals', async () => {
    const { url, gateway } = await res.demoGateway({ heartbeatIntervalMs: 50 });
    const live = await openSocket(res, url);
    const livePings = pingCounter(live);
    const [liveSession] = [...gateway.sessions.values()];

    const gone = firstValueFrom(gateway.disconnected$);
    // Counters attach before the handshake: the first ping can arrive in the same read as it.
    const mute = res.track(new WebSocket(url, undefined, { autoPong: false }));
    const mutePings = pingCounter(mute);
    const muteClosed = closeOf(mute);

    expect((await within(muteClosed, 'the mute client to be cut off')).code).toBe(1006);
    const goneSession = await gone;
    expect(goneSession).not.toBe(liveSession);
    expect(await goneSession.closed).toMatchObject({ code: 1006 });
    // It was pinged (and said nothing) before it was cut off.
    expect(mutePings.count()).toBeGreaterThanOrEqual(1);

    // The live client answers every ping (ws does so by itself) and is still there
    // after several more intervals.
    const seen = livePings.count();
    await within(livePings.reach(seen + 4), 'four more pings');
    expect(live.readyState).toBe(WebSocket.OPEN);
    expect([...gateway.sessions.values()]).toEqual([liveSession]);
  });

  it('traffic is not an answer: a client sending messages but no pongs is still cut off', async () => {
    const { url, gateway } = await res.demoGateway({ heartbeatIntervalMs: 50 });
    // The listener before the handshake: the first ping can arrive in the same read as it, and
    // the client may get no other before it is cut off.
    const chatty = res.track(new WebSocket(url, undefined, { autoPong: false }));
    let id = 0;
    chatty.on('ping', () =>
      chatty.send(JSON.stringify({ jsonrpc: '2.0', method: 'sum', params: [1], id: ++id })),
    );
    expect((await within(closeOf(chatty), 'the chatty client to be cut off')).code).toBe(1006);
    // It did send a request for every ping it got.
    expect(id).toBeGreaterThanOrEqual(1);
    await waitUntil(() => gateway.sessions.size === 0, 'the session to end');
  });

  it('a client that answers pings by hand is kept', async () => {
    const { url, gateway } = await res.demoGateway({ heartbeatIntervalMs: 50 });
    // Listeners before the handshake: the first ping can arrive in the same read as it.
    const manual = res.track(new WebSocket(url, undefined, { autoPong: false }));
    const pings = pingCounter(manual);
    manual.on('ping', (data) => manual.pong(data));
    await new Promise((resolve) => manual.once('open', resolve));
    await within(pings.reach(5), 'five pings');
    expect(manual.readyState).toBe(WebSocket.OPEN);
    expect(gateway.sessions.size).toBe(1);
  });
});

describe('client heartbeat (rpc.ping)', () => {
  it('an RpcClient facing a server that never answers closes with 4000 and reconnects by itself', async () => {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    servers.push(wss);
    await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
    const address = wss.address();
    const port = typeof address === 'object' && address ? address.port : 0;

    const received: string[] = [];
    const closes: { code: number; reason: string }[] = [];
    let connections = 0;
    const firstClosed = new Promise<void>((resolve) => {
      wss.on('connection', (socket) => {
        connections++;
        socket.on('message', (data) => received.push((data as Buffer).toString('utf8')));
        socket.on('close', (code, reason) => {
          closes.push({ code, reason: reason.toString('utf8') });
          resolve();
        });
      });
    });

    const client = res.client(`ws://127.0.0.1:${port}`, {
      heartbeat: { intervalMs: 50, timeoutMs: 50 },
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
    });
    const { states } = recordStates(client);
    await waitForState(client, 'open');
    await within(waitForState(client, 'reconnecting'), 'the client to give up on the server');
    expect(states.slice(0, 3)).toEqual(['connecting', 'open', 'reconnecting']);

    await within(firstClosed, 'the server to see the close');
    expect(closes[0]).toEqual({ code: HEARTBEAT_CLOSE_CODE, reason: 'heartbeat timeout' });
    expect(HEARTBEAT_CLOSE_CODE).toBe(4000);
    const pings = received.map((text) => JSON.parse(text) as { method?: string; id?: unknown });
    expect(pings[0]).toMatchObject({ jsonrpc: '2.0', method: 'rpc.ping' });
    expect(typeof pings[0]!.id).toBe('number');

    // It comes back by itself.
    await waitUntil(() => connections >= 2, 'a new connection');
    await waitForState(client, 'open');
  });

  it("leaves a silent server however many of the table's slots its calls hold; the table holds one ping more at most", async () => {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    servers.push(wss);
    await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
    const { port } = wss.address() as { port: number };
    const maxPendingCalls = 3;
    for (let held = 0; held <= maxPendingCalls; held++) {
      const closes: { code: number; reason: string }[] = [];
      const methods: string[] = [];
      wss.removeAllListeners('connection');
      wss.on('connection', (socket) => {
        socket.on('message', (data) => {
          methods.push(
            (JSON.parse((data as Buffer).toString('utf8')) as { method: string }).method,
          );
        });
        socket.on('close', (code, reason) => closes.push({ code, reason: reason.toString() }));
      });
      const client = res.client(`ws://127.0.0.1:${port}`, {
        maxPendingCalls,
        heartbeat: { intervalMs: 50, timeoutMs: 50 },
        reconnect: false,
      });
      await waitForState(client, 'open');
      // Calls the server never answers, without a timeout of their own: only the heartbeat ends them.
      const calls = Array.from({ length: held }, () =>
        client.call('hang', undefined, { timeoutMs: 0 }).then(
          () => 'answered',
          (err: Error) => err.name,
        ),
      );
      if (held === maxPendingCalls) {
        expect(await client.call('one.more').catch((err: Error) => err.name)).toBe(
          'TooManyPendingCallsError',
        );
      }
      await within(waitForState(client, 'closed'), `the client to leave with ${held} calls held`);
      await waitUntil(() => closes.length === 1, 'the server to see the close');
      expect(closes[0]).toEqual({ code: HEARTBEAT_CLOSE_CODE, reason: 'heartbeat timeout' });
      expect(methods).toContain('rpc.ping');
      expect(await Promise.all(calls)).toEqual(Array(held).fill('ConnectionClosedError'));
    }
  });

  it('stays open against a gateway that answers rpc.ping', async () => {
    const { url, gateway } = await res.demoGateway();
    const client = res.client(url, { heartbeat: { intervalMs: 50, timeoutMs: 50 } });
    const { states } = recordStates(client);
    await waitForState(client, 'open');
    const before = gateway.metrics.messagesIn;
    // Five pings went out and were answered; the connection was never replaced.
    await waitUntil(() => gateway.metrics.messagesIn >= before + 5, 'five pings');
    expect(gateway.metrics.messagesOut).toBeGreaterThanOrEqual(4);
    expect(states).toEqual(['connecting', 'open']);
    expect(gateway.sessions.size).toBe(1);
    expect(await client.call('sum', [2, 2])).toBe(4);
  });
});

describe('server heartbeat: peers that do not read', () => {
  /** A `ws` client that reads nothing after its handshake: its socket is paused. */
  async function deafSocket(url: string): Promise<WebSocket> {
    const socket = await openSocket(res, url);
    socket.on('error', () => undefined);
    (socket as unknown as { _socket: Socket })._socket.pause();
    return socket;
  }

  /** Queue `count` notifications of 64 KiB for `session`. */
  function fill(session: Session, count: number): void {
    const chunk = 'x'.repeat(64 * 1024);
    for (let i = 0; i < count; i++) session.notify('fill', [chunk]);
  }

  it('a client that never reads but sends pongs on a timer is cut off: only a pong carrying our ping’s payload counts', async () => {
    const { url, gateway } = await res.demoGateway({ heartbeatIntervalMs: 200 });
    const opened = firstValueFrom(gateway.connected$);
    const deaf = await deafSocket(url);
    const session = await opened;
    let pongsArrived = 0;
    (session.transport as WsTransport).socket.on('pong', () => pongsArrived++);
    const timer = setInterval(() => deaf.pong(), 5);
    try {
      expect(await within(session.closed, 'the deaf client to be cut off')).toMatchObject({
        code: 1006,
      });
    } finally {
      clearInterval(timer);
    }
    // Its pongs did arrive (and once kept such a client forever); they answered no ping.
    expect(pongsArrived).toBeGreaterThanOrEqual(1);
  });

  it('the same with megabytes queued for it: cut off, though it keeps sending pongs', async () => {
    const { url, gateway } = await res.demoGateway({ heartbeatIntervalMs: 200 });
    const opened = firstValueFrom(gateway.connected$);
    const deaf = await deafSocket(url);
    const session = await opened;
    const timer = setInterval(() => deaf.pong(), 5);
    try {
      fill(session, 128); // 8 MiB: more than loopback buffers hold
      expect(await within(session.closed, 'the deaf client to be cut off')).toMatchObject({
        code: 1006,
      });
    } finally {
      clearInterval(timer);
    }
  });

  it('a TCP client whose output stays above maxBufferedBytes is closed (1008); one that reads stays', async () => {
    const MAX_BUFFERED = 64 * 1024;
    const { gateway } = await res.demoGateway({
      heartbeatIntervalMs: 200,
      limits: { maxBufferedBytes: MAX_BUFFERED },
    });
    const { port } = await gateway.listenTcp(0, '127.0.0.1');
    const connect = async (): Promise<{ socket: Socket; session: Session }> => {
      const opened = firstValueFrom(gateway.connected$);
      const socket = netConnect(port, '127.0.0.1');
      res.netSockets.push(socket);
      socket.on('error', () => undefined);
      return { socket, session: await opened };
    };
    const deaf = await connect();
    deaf.socket.pause();
    const reader = await connect();
    let read = 0;
    reader.socket.on('data', (chunk: Buffer) => (read += chunk.length));

    // Fill both until the deaf one's queue is past the bound (the kernel's buffers fill first).
    for (let pushes = 0; deaf.session.transport.bufferedAmount <= MAX_BUFFERED; pushes++) {
      if (pushes > 2_000) throw new Error('the output never queued up');
      if (deaf.session.isClosed) break;
      fill(deaf.session, 1);
      fill(reader.session, 1);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await within(deaf.session.closed, 'the deaf TCP client to be closed')).toEqual({
      code: 1008,
      reason: 'not reading',
    });
    // The reader, sent as much, is still connected and gets all of it.
    expect(reader.session.isClosed).toBe(false);
    await waitUntil(() => reader.session.transport.bufferedAmount === 0, 'the reader to catch up');
    expect(read).toBeGreaterThan(0);
    expect([...gateway.sessions.values()]).toEqual([reader.session]);
  });
});
