/**
 * A connection's slots (limits.maxConnections, maxConnectionsPerIp, and its user's
 * maxConnectionsPerUser) are held until what its close left going has settled: the handlers of
 * its calls and notifications (told by their signal, which they need not heed) and the
 * authorize hooks still deciding on them. What those hold (params, the session) stays within
 * maxInFlight × maxMessageBytes per slot; else a client could close and open again to have the
 * node hold any number of them. A handler that closes its own connection (a logout) holds its
 * slot the same way, and the members of its batch after it are not run. The model: an address
 * is admitted while fewer than maxConnectionsPerIp of its connections are open or have runs left.
 */
import { connect } from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import type { Gateway } from '../../src/server/gateway.js';
import { sampleValue, scrape, untilSample } from '../support/metrics.js';
import { Resources } from '../support/resources.js';
import { attemptUpgrade, closeOf, openSocket } from '../support/sockets.js';
import { waitFor } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const PER_IP = 2;

/** A gateway whose `hold` calls, `note` notifications and `guarded` authorize wait for the test. */
async function holdingGateway(maxConnectionsPerIp: number) {
  const waiting = new Map<string, () => void>();
  const hold = (key: string): Promise<void> =>
    new Promise((resolve) => waiting.set(key, () => resolve()));
  const { url, httpUrl, gateway } = await res.gateway({
    heartbeatIntervalMs: 0,
    limits: {
      maxConnectionsPerIp,
      connectionsPerSecondPerIp: 0,
      ratePerSecond: 0,
      metricsCacheMs: 0,
    },
    authorize: ({ method, params }) =>
      method === 'guarded' ? hold((params as [string])[0]).then(() => true) : true,
  });
  // Neither handler looks at its signal: it runs on after the close, as a careless one does.
  gateway.method('hold', ([key]: [string]) => hold(key));
  gateway.method('note', ([key]: [string]) => hold(key));
  gateway.method('guarded', () => 'done');
  // Heeds its signal: ends with the connection.
  gateway.method(
    'heed',
    ([key]: [string], ctx) =>
      new Promise((_, reject) => {
        waiting.set(key, () => undefined);
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error));
      }),
  );
  // Closes its own connection before it returns its promise (a logout, say): its run starts
  // once the connection is closed already.
  gateway.method('logout', ([key]: [string], ctx) => {
    ctx.session.close(1000, 'logged out');
    return hold(key);
  });
  /** Let the run `key` settle; resolves once what follows from it (microtasks) has run. */
  const settle = async (key: string): Promise<void> => {
    waiting.get(key)!();
    waiting.delete(key);
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
  };
  /** The gauge of closed connections whose slots are held. */
  const holding = async (): Promise<number | undefined> =>
    sampleValue(await scrape(httpUrl), 'rpc_closed_connections_holding_slots');
  return { url, httpUrl, gateway, waiting, settle, holding };
}

type Kind = 'hold' | 'note' | 'guarded' | 'logout';

/** Send a run of `kind` named `key` on `socket`, and wait until the gateway holds it. */
async function startRun(
  socket: WebSocket,
  waiting: Map<string, unknown>,
  kind: Kind,
  key: string,
): Promise<void> {
  const message =
    kind === 'note'
      ? { jsonrpc: '2.0', method: 'note', params: [key] }
      : { jsonrpc: '2.0', method: kind, params: [key], id: key };
  socket.send(JSON.stringify(message));
  await waitFor(() => waiting.has(key), `the ${kind} ${key} running`);
}

async function closeClient(socket: WebSocket, gateway: Gateway, open: number): Promise<void> {
  const closed = closeOf(socket);
  socket.close();
  await closed;
  await waitFor(() => gateway.sessions.size === open, 'the session gone');
}

describe('runs that outlive their connection', () => {
  it("a handler that closes its own connection before it returns holds the slot until it settles, and a batch's later members do not run", async () => {
    const { url, gateway, waiting, settle, holding } = await holdingGateway(1);
    const socket = await openSocket(res, url);
    const closed = closeOf(socket);
    const call = (method: string, key: string) => ({
      jsonrpc: '2.0',
      method,
      params: [key],
      id: key,
    });
    socket.send(
      JSON.stringify([
        call('logout', 'k1'),
        call('hold', 'k2'),
        { jsonrpc: '2.0', method: 'note', params: ['k3'] },
      ]),
    );
    expect(await closed).toMatchObject({ code: 1000, reason: 'logged out' });
    await waitFor(() => gateway.sessions.size === 0, 'the session gone');
    expect([...waiting.keys()]).toEqual(['k1']);
    expect(await holding()).toBe(1);
    expect(await attemptUpgrade(res, url)).toBe(429);
    await settle('k1');
    expect(await holding()).toBe(0);
    expect(await attemptUpgrade(res, url)).toBe('open');
  });

  for (const kind of ['hold', 'note', 'guarded'] as const) {
    it(`a ${kind === 'hold' ? 'call' : kind === 'note' ? 'notification' : 'call waiting on authorize'} left running holds the closed connection's slot until it settles`, async () => {
      const { url, gateway, waiting, settle, holding } = await holdingGateway(1);
      const socket = await openSocket(res, url);
      await startRun(socket, waiting, kind, 'k1');
      expect(await holding()).toBe(0);
      await closeClient(socket, gateway, 0);
      expect(await holding()).toBe(1);
      expect(await attemptUpgrade(res, url)).toBe(429);
      await settle('k1');
      expect(await holding()).toBe(0);
      expect(await attemptUpgrade(res, url)).toBe('open');
    });
  }

  it('a POST /rpc exchange whose caller went away holds its slot until the runs it left have settled', async () => {
    const { url, httpUrl, waiting, settle, holding } = await holdingGateway(1);
    // A call that ends with the exchange, and a notification whose handler runs on after it.
    const body = JSON.stringify([
      { jsonrpc: '2.0', method: 'heed', params: ['k1'], id: 1 },
      { jsonrpc: '2.0', method: 'note', params: ['k2'] },
    ]);
    const { port } = new URL(httpUrl);
    const socket = connect(Number(port), '127.0.0.1');
    res.netSockets.push(socket);
    socket.on('error', () => undefined);
    socket.write(
      `POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    await waitFor(() => waiting.has('k1') && waiting.has('k2'), 'both running');
    socket.destroy();
    await untilSample(httpUrl, 'rpc_closed_connections_holding_slots', {}, 1);
    expect(await attemptUpgrade(res, url)).toBe(429);
    await settle('k2');
    expect(await holding()).toBe(0);
    expect(await attemptUpgrade(res, url)).toBe('open');
  });

  it('model: an address is admitted while fewer than maxConnectionsPerIp of its connections are open or have runs left', async () => {
    const op = fc.oneof(
      { weight: 3, arbitrary: fc.constant({ k: 'open' as const }) },
      {
        weight: 3,
        arbitrary: fc.record({
          k: fc.constant('run' as const),
          kind: fc.constantFrom<Kind>('hold', 'note', 'guarded', 'logout'),
          at: fc.nat(),
        }),
      },
      { weight: 2, arbitrary: fc.record({ k: fc.constant('close' as const), at: fc.nat() }) },
      { weight: 2, arbitrary: fc.record({ k: fc.constant('settle' as const), at: fc.nat() }) },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 14 }), async (ops) => {
        const { url, gateway, waiting, settle } = await holdingGateway(PER_IP);
        // The model: each connection, open or not, with the runs it left going.
        const conns: { socket: WebSocket; open: boolean; runs: Set<string> }[] = [];
        const held = (): number => conns.filter((c) => c.open || c.runs.size > 0).length;
        const open = (): typeof conns => conns.filter((c) => c.open);
        let n = 0;
        try {
          for (const step of ops) {
            if (step.k === 'open') {
              const expected = held() < PER_IP ? 'open' : 429;
              const outcome = await attemptUpgrade(res, url);
              expect(outcome).toBe(expected);
              // attemptUpgrade tracks the socket it made: the last one.
              const socket = res.sockets.at(-1)!;
              if (outcome === 'open') conns.push({ socket, open: true, runs: new Set() });
            } else if (step.k === 'run') {
              const live = open();
              if (live.length === 0) continue;
              const conn = live[step.at % live.length]!;
              const key = `r${++n}`;
              const closed = closeOf(conn.socket);
              await startRun(conn.socket, waiting, step.kind, key);
              conn.runs.add(key);
              if (step.kind === 'logout') {
                conn.open = false;
                await closed;
                await waitFor(() => gateway.sessions.size === open().length, 'the session gone');
              }
            } else if (step.k === 'close') {
              const live = open();
              if (live.length === 0) continue;
              const conn = live[step.at % live.length]!;
              conn.open = false;
              await closeClient(conn.socket, gateway, open().length);
            } else {
              const running = conns.flatMap((c) => [...c.runs].map((key) => ({ c, key })));
              if (running.length === 0) continue;
              const { c, key } = running[step.at % running.length]!;
              c.runs.delete(key);
              await settle(key);
            }
          }
        } finally {
          for (const key of [...waiting.keys()]) await settle(key);
          await res.cleanup();
        }
      }),
      {
        numRuns: 15,
        examples: [
          // A handler that closed its own connection holds its slot until it settles.
          [
            [
              { k: 'open' },
              { k: 'run', kind: 'logout', at: 0 },
              { k: 'open' },
              { k: 'open' },
              { k: 'settle', at: 0 },
              { k: 'open' },
            ],
          ],
          // Both slots held by closed connections' runs; one settles, one more is admitted.
          [
            [
              { k: 'open' },
              { k: 'run', kind: 'hold', at: 0 },
              { k: 'open' },
              { k: 'run', kind: 'guarded', at: 1 },
              { k: 'close', at: 0 },
              { k: 'close', at: 0 },
              { k: 'open' },
              { k: 'settle', at: 1 },
              { k: 'open' },
              { k: 'open' },
            ],
          ],
        ],
      },
    );
  });
});
