/**
 * Messages handed over as they are read are bounded per event-loop turn, all connections
 * together: at most DIRECT_MESSAGES_PER_TURN go to sessions straight from the reads of one
 * turn, WebSocket and TCP connections alike; past it, a connection's message is held, and so is
 * every later one of it, and handed over in the held turns (HELD_MESSAGES_PER_TURN a task),
 * each connection's in order, none lost. A hundred connections pipelining small requests were
 * each handed a whole 64 KiB read in one poll phase, and the loop stalled for seconds.
 *
 * A message is told as handed over directly or from what was held by the transport's held
 * list at that moment (none while a message goes straight on). A turn's direct deliveries are
 * those between the first of them and a setImmediate it schedules (the check phase after the
 * reads); a held turn's are those of one task, between two runs of the nextTick queue.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import type { NdjsonTransport } from '../../src/transport/ndjson-transport.js';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import {
  DIRECT_MESSAGES_PER_TURN,
  HELD_MESSAGES_PER_TURN,
} from '../../src/transport/input-turns.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { Resources } from '../support/resources.js';
import { Peak, tapReceive } from '../support/turn-peaks.js';
import { openSocket } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** No budget, rate or in-flight limit meets these loads: only the turns bound them. */
const UNBOUNDED = {
  bytesPerSecond: 0,
  bytesPerSecondPerIp: 0,
  ratePerSecond: 0,
  maxInFlight: 1_000_000,
  maxPendingCalls: 1_000_000,
  connectionsPerSecondPerIp: 0,
};

type Transport = WsTransport | NdjsonTransport;

/**
 * The most messages handed to sessions directly in one turn and from held lists in one task,
 * how many of each, and each connection's ids in the order handed.
 */
class HandOver {
  private readonly directPeak = new Peak('turn');
  private readonly heldPeak = new Peak('task');
  direct = 0;
  fromHeld = 0;
  readonly ids = new Map<Transport, number[]>();

  get mostDirect(): number {
    return this.directPeak.most;
  }

  get mostHeld(): number {
    return this.heldPeak.most;
  }

  watch(transport: Transport): void {
    const open = transport as unknown as { held: unknown };
    const ids: number[] = [];
    this.ids.set(transport, ids);
    tapReceive(transport, (text) => {
      if (open.held === undefined) {
        this.direct++;
        this.directPeak.add();
      } else {
        this.fromHeld++;
        this.heldPeak.add();
      }
      ids.push((JSON.parse(text) as { id: number }).id);
    });
  }
}

const echo = (id: number) => `{"jsonrpc":"2.0","method":"echo","params":[${id}],"id":${id}}`;
const range = (count: number) => Array.from({ length: count }, (_, i) => i + 1);

/** Ids of the replies read, in order. */
function idsOf(lines: string[]): number[] {
  return lines.map((line) => (JSON.parse(line) as { id: number }).id);
}

async function directGateway(limits: Record<string, number> = {}) {
  const running = await res.gateway({
    heartbeatIntervalMs: 0,
    limits: { ...UNBOUNDED, ...limits },
  });
  running.gateway.method('echo', (params) => params);
  return running;
}

type Running = Awaited<ReturnType<typeof directGateway>>;

interface Peer {
  transport: Transport;
  replies: string[];
  /** Write `count` echo calls at once, ids 1..count. */
  send(count: number): void;
  end(): void;
}

/** A WebSocket connection from 127.0.0.1, its transport, the replies it reads. */
async function wsPeer(running: Running): Promise<Peer> {
  const before = sessionIds(running.gateway);
  const socket: WebSocket = await openSocket(res, running.url);
  const replies: string[] = [];
  socket.on('message', (data) => replies.push((data as Buffer).toString('utf8')));
  const transport = newSession(running.gateway, before).transport as WsTransport;
  return {
    transport,
    replies,
    send: (count) => {
      for (let id = 1; id <= count; id++) socket.send(echo(id));
    },
    end: () => socket.terminate(),
  };
}

/** A TCP (NDJSON) connection from 127.0.0.1, its transport, the replies it reads. */
async function tcpPeer(running: Running, port: number): Promise<Peer> {
  const before = sessionIds(running.gateway);
  const socket: Socket = connect(port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  await waitUntil(
    () => [...running.gateway.sessions.keys()].some((id) => !before.has(id)),
    'the session',
  );
  const replies: string[] = [];
  let rest = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop()!;
    replies.push(...lines);
  });
  const transport = newSession(running.gateway, before).transport as NdjsonTransport;
  return {
    transport,
    replies,
    // One write: the lines arrive together, as a pipelining peer's do.
    send: (count) =>
      void socket.write(
        range(count)
          .map((id) => `${echo(id)}\n`)
          .join(''),
      ),
    end: () => socket.destroy(),
  };
}

/** Send every peer's calls in one go, wait for every reply, check order and bounds. */
async function sendAndCheck(peers: Peer[], counts: number[]): Promise<HandOver> {
  const handOver = new HandOver();
  for (const { transport } of peers) handOver.watch(transport);
  // In one task: all of it is in the kernel's buffers before the gateway reads any.
  peers.forEach((peer, i) => peer.send(counts[i]!));
  for (const [i, { replies }] of peers.entries()) {
    await waitUntil(() => replies.length === counts[i], 'every reply', 60_000);
    expect(idsOf(replies)).toEqual(range(counts[i]!));
  }
  for (const [i, { transport }] of peers.entries()) {
    expect(handOver.ids.get(transport)).toEqual(range(counts[i]!));
  }
  expect(handOver.mostDirect).toBeLessThanOrEqual(DIRECT_MESSAGES_PER_TURN);
  expect(handOver.mostHeld).toBeLessThanOrEqual(HELD_MESSAGES_PER_TURN);
  return handOver;
}

describe('messages handed over as read, bounded per turn', () => {
  it('hands WebSocket connections at most DIRECT_MESSAGES_PER_TURN messages a turn straight from their reads, the rest held, each in order', async () => {
    const running = await directGateway();
    // 8 × 800 calls of about 55 bytes: each connection's in one 64 KiB read, 6,400 in a turn.
    const counts = Array.from({ length: 8 }, () => 800);
    const peers: Peer[] = [];
    for (const _ of counts) peers.push(await wsPeer(running));
    const handOver = await sendAndCheck(peers, counts);
    expect(handOver.fromHeld).toBeGreaterThan(0);
    for (const peer of peers) peer.end();
  }, 90_000);

  it('hands TCP connections at most DIRECT_MESSAGES_PER_TURN lines a turn straight from their reads, the rest held, each in order', async () => {
    const running = await directGateway();
    const { port } = await running.gateway.listenTcp(0, '127.0.0.1');
    const counts = Array.from({ length: 8 }, () => 800);
    const peers: Peer[] = [];
    for (const _ of counts) peers.push(await tcpPeer(running, port));
    const handOver = await sendAndCheck(peers, counts);
    expect(handOver.fromHeld).toBeGreaterThan(0);
    for (const peer of peers) peer.end();
  }, 90_000);

  it('matches the model: any WebSocket and TCP connections, any counts, with or without an input budget that holds, each handed all its messages in order, at most DIRECT_MESSAGES_PER_TURN direct a turn and HELD_MESSAGES_PER_TURN held a task', async () => {
    // With the budget: 4 KiB a message against 64 MiB/s, bursts of 2 KiB, so reads hold too.
    const budgeted = await directGateway({
      maxMessageBytes: 1024,
      messageCostBytes: 4096,
      bytesPerSecond: 64 * 1024 * 1024,
      bytesPerSecondPerIp: 64 * 1024 * 1024,
    });
    const free = await directGateway();
    const ports = new Map<Running, number>();
    for (const running of [budgeted, free]) {
      ports.set(running, (await running.gateway.listenTcp(0, '127.0.0.1')).port);
    }
    await fc.assert(
      fc.asyncProperty(
        fc.boolean(),
        fc.array(fc.record({ tcp: fc.boolean(), count: fc.integer({ min: 1, max: 1200 }) }), {
          minLength: 1,
          maxLength: 8,
        }),
        async (withBudget, connections) => {
          const running = withBudget ? budgeted : free;
          const peers: Peer[] = [];
          for (const { tcp } of connections) {
            peers.push(tcp ? await tcpPeer(running, ports.get(running)!) : await wsPeer(running));
          }
          try {
            await sendAndCheck(
              peers,
              connections.map(({ count }) => count),
            );
          } finally {
            for (const peer of peers) peer.end();
          }
        },
      ),
      { numRuns: 16 },
    );
  }, 240_000);
});
