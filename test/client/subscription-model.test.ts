/*
 * Model-based property test of the client's subscription state (src/client/subscriptions.ts),
 * driven through the real client over a scripted in-process "socket".
 *
 * A model server implements the topic protocol as the gateway does (reply first, then the
 * position or the resume: gap signal, replay from bounded history; live messages; a new epoch
 * when the broker loses the topic), and can also misbehave: drop a live message for one
 * subscription without a word (a hole), or send a subscribe's notifications before its reply.
 * The test decides when frames are taken off the socket, in reads of any size (a reply and a
 * replay of up to 100 000 messages in one read), and when the connection drops.
 *
 * What every Observer must see, from the position it was given: each published seq exactly
 * once and in order, or covered by a gap signal with its count (`null` only when the topic
 * was numbered anew); and, once everything is read, the topic's last message.
 */
import fc from 'fast-check';
import type { Subscription } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { RpcClient } from '../../src/client/client.js';
import type { SubscriptionEvent } from '../../src/client/subscriptions.js';
import type {
  WebSocketConstructor,
  WebSocketLike,
} from '../../src/transport/websocket-transport.js';
import { silentLogger } from '../../src/peer/logger.js';

const TOPIC = 'feed';

interface Outbound {
  text: string;
  /** Set on a position signal: whose subscribe it answers and where it starts. */
  position?: { observer: number; seq: number; epoch: number };
  /** A subscribe reply, with the id it hands out (for the out-of-order fault). */
  replyTo?: string;
  /**
   * Set on the reply to a subscribe that asked for its position: where the server started the
   * subscription (what its position frame says). The reply read, the Observer is subscribed
   * from there, whether or not it reads the position before the connection drops.
   */
  accepts?: { observer: number; seq: number; epoch: number };
}

interface ServerSubscription {
  id: string;
  observer: number;
  /** The epoch this subscriber was last told (or started in). */
  epoch: number;
}

interface Connection {
  socket: FakeSocket;
  subscriptions: ServerSubscription[];
  /** Ids handed out on this connection: the shared id is reused, others are not. */
  counter: number;
}

/** The topic as a broker with bounded history keeps it, and the gateway's side of each socket. */
class ModelServer {
  epoch = 1;
  lastSeq = 0;
  log: { seq: number; epoch: number }[] = [];
  connections = new Set<Connection>();
  /** Live messages to leave out, without a word, for the next subscriptions that would get them. */
  silentDrops = 0;
  /** Send the next subscribe's notifications before its reply (only for an id never used before). */
  replyLate = false;

  constructor(readonly historyMax: number) {}

  data(seq: number, epoch: number): string {
    return `${epoch}:${seq}`;
  }

  publish(count: number): void {
    for (let i = 0; i < count; i++) {
      const seq = ++this.lastSeq;
      this.log.push({ seq, epoch: this.epoch });
      if (this.log.length > this.historyMax) this.log.shift();
      for (const connection of this.connections) {
        for (const sub of connection.subscriptions) {
          if (sub.epoch !== this.epoch) {
            // The numbering restarted: the gateway says so before the new numbering's first.
            sub.epoch = this.epoch;
            this.push(connection, { text: frame(sub.id, { gap: null, epoch: `E${this.epoch}` }) });
          }
          if (this.silentDrops > 0) {
            this.silentDrops--;
            continue;
          }
          this.push(connection, {
            text: frame(sub.id, { seq, result: this.data(seq, this.epoch) }),
          });
        }
      }
    }
  }

  /** The broker lost the topic: it numbers it from 1 again under a new epoch. */
  loseTopic(): void {
    this.epoch++;
    this.lastSeq = 0;
    this.log = [];
  }

  open(socket: FakeSocket): Connection {
    const connection: Connection = { socket, subscriptions: [], counter: 0 };
    this.connections.add(connection);
    return connection;
  }

  close(connection: Connection): void {
    this.connections.delete(connection);
  }

  receive(connection: Connection, text: string): void {
    const parsed = JSON.parse(text) as Request | Request[];
    for (const request of Array.isArray(parsed) ? parsed : [parsed])
      this.handle(connection, request);
  }

  private handle(connection: Connection, request: Request): void {
    if (request.id === undefined) return;
    if (request.method === 'subscribe') {
      return this.subscribe(connection, { ...request, id: request.id });
    }
    if (request.method === 'unsubscribe') {
      const id = (request.params as string[])[0];
      const index = connection.subscriptions.findIndex((s) => s.id === id);
      if (index >= 0) connection.subscriptions.splice(index, 1);
      return this.push(connection, { text: reply(request.id, index >= 0) });
    }
    this.push(connection, {
      text: JSON.stringify({
        jsonrpc: '2.0',
        error: { code: -32601, message: 'Method not found' },
        id: request.id,
      }),
    });
  }

  private subscribe(connection: Connection, request: Request & { id: number | string }): void {
    const [topic, params, options] = request.params as [
      string,
      { o: number },
      { position?: true; since?: number; epoch?: string },
    ];
    expect(topic).toBe(TOPIC);
    // The topic's shared id for the first subscription on a connection, as the gateway does.
    const fresh = !connection.subscriptions.some((s) => s.id === TOPIC);
    const id = fresh ? TOPIC : `x${++connection.counter}`;
    const sub: ServerSubscription = { id, observer: params.o, epoch: this.epoch };
    connection.subscriptions.push(sub);
    const frames: Outbound[] = [];
    const epoch = `E${this.epoch}`;
    if (options.position) {
      frames.push({
        text: frame(id, { seq: this.lastSeq, epoch }),
        position: { observer: params.o, seq: this.lastSeq, epoch: this.epoch },
      });
    } else {
      const since = options.since!;
      const sameNumbering = options.epoch === epoch && since <= this.lastSeq;
      const from = sameNumbering ? since : 0;
      if (!sameNumbering) frames.push({ text: frame(id, { gap: null, epoch }) });
      const first = this.log[0]?.seq ?? this.lastSeq + 1;
      const lost = Math.max(0, first - from - 1);
      if (lost > 0) frames.push({ text: frame(id, { gap: lost, epoch }) });
      for (const m of this.log) {
        if (m.seq > from) {
          frames.push({ text: frame(id, { seq: m.seq, result: this.data(m.seq, m.epoch) }) });
        }
      }
    }
    const answer: Outbound = { text: reply(request.id, id), replyTo: id };
    if (options.position)
      answer.accepts = { observer: params.o, seq: this.lastSeq, epoch: this.epoch };
    // Only for an id never handed out before on this connection: a reused id's early
    // notifications cannot be told from the old subscription's.
    if (this.replyLate && id !== TOPIC) {
      this.replyLate = false;
      for (const f of frames) this.push(connection, f);
      this.push(connection, answer);
    } else {
      this.push(connection, answer);
      for (const f of frames) this.push(connection, f);
    }
  }

  private push(connection: Connection, outbound: Outbound): void {
    connection.socket.outbound.push(outbound);
  }
}

interface Request {
  jsonrpc: '2.0';
  method: string;
  params?: unknown;
  id?: number | string;
}

function frame(id: string, params: Record<string, unknown>): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    method: 'subscription',
    params: { subscription: id, ...params },
  });
}

function reply(id: number | string, result: unknown): string {
  return JSON.stringify({ jsonrpc: '2.0', result, id });
}

/** Where each Observer was told it starts (its first subscribe reply read, as its position says). */
type Starts = Map<number, { seq: number; epoch: number }>;

/** A WebSocket whose other end is the model server; the test takes frames off it. */
class FakeSocket implements WebSocketLike {
  readyState = 0;
  readonly bufferedAmount = 0;
  readonly protocol = '';
  binaryType = 'blob';
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;
  outbound: Outbound[] = [];
  private connection: Connection | undefined;
  /** Observers whose subscribe reply was read here, but not yet the position it promised. */
  private readonly unplaced = new Set<number>();
  /** Observers whose position was read here (before their reply, where the server sent it so). */
  private readonly placed = new Set<number>();

  constructor(private readonly world: World) {
    world.sockets.push(this);
    setTimeout(() => {
      if (this.readyState !== 0) return;
      this.readyState = 1;
      this.connection = world.server.open(this);
      this.onopen?.({});
    }, 0);
  }

  send(data: string): void {
    if (this.readyState === 1 && this.connection) this.world.server.receive(this.connection, data);
  }

  close(code = 1000, reason = ''): void {
    this.lose(code, reason);
  }

  /** Take up to `count` frames off the socket in one read: handled synchronously, in order. */
  read(count: number): void {
    const frames = this.outbound.splice(0, count);
    for (const f of frames) {
      if (this.readyState !== 1) return;
      // An Observer starts where the reply that tells its client of the subscription says (what
      // its position says too): a position read before its reply, on a connection lost before
      // the reply, told the client nothing (it resubscribes from a later position).
      const start = f.accepts;
      if (start && !this.world.starts.has(start.observer)) {
        this.world.starts.set(start.observer, { seq: start.seq, epoch: start.epoch });
      }
      if (f.accepts && !this.placed.has(f.accepts.observer)) this.unplaced.add(f.accepts.observer);
      if (f.position) {
        this.unplaced.delete(f.position.observer);
        this.placed.add(f.position.observer);
      }
      this.onmessage?.({ data: f.text });
    }
  }

  /** The connection drops: what was not read is lost. */
  lose(code = 1006, reason = ''): void {
    if (this.readyState >= 2) return;
    this.readyState = 3;
    this.outbound = [];
    for (const observer of this.unplaced) this.world.unknownStarts.add(observer);
    if (this.connection) this.world.server.close(this.connection);
    setTimeout(() => this.onclose?.({ code, reason }), 0);
  }
}

class World {
  readonly sockets: FakeSocket[] = [];
  readonly starts: Starts = new Map();
  /**
   * Observers subscribed (their reply read) on a connection lost before they read where they
   * start: their client cannot tell what was published meanwhile, so it may say so once, with a
   * gap signal of unknown size before its first message.
   */
  readonly unknownStarts = new Set<number>();
  constructor(readonly server: ModelServer) {}

  get current(): FakeSocket | undefined {
    const last = this.sockets.at(-1);
    return last && last.readyState === 1 ? last : undefined;
  }

  webSocketClass(): WebSocketConstructor {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- captured by the class below
    const world = this;
    return class extends FakeSocket {
      constructor() {
        super(world);
      }
    };
  }
}

type Op =
  | { kind: 'publish'; count: number }
  | { kind: 'read'; count: number }
  | { kind: 'drop' }
  | { kind: 'loseTopic' }
  | { kind: 'silentDrop'; count: number }
  | { kind: 'replyLate' }
  | { kind: 'observe' }
  | { kind: 'unobserve'; which: number };

function ops(maxBurst: number): fc.Arbitrary<Op[]> {
  const op: fc.Arbitrary<Op> = fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('publish' as const),
        count: fc.integer({ min: 1, max: maxBurst }),
      }),
    },
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('read' as const),
        // Reads of a frame or two as often as large ones: a reply read without the position
        // that follows it, or a replay cut anywhere, needs them (one in 600 was that small).
        count: fc.oneof(
          fc.integer({ min: 1, max: 2 }),
          fc.integer({ min: 1, max: maxBurst * 2 + 4 }),
        ),
      }),
    },
    { weight: 2, arbitrary: fc.constant({ kind: 'drop' as const }) },
    { weight: 1, arbitrary: fc.constant({ kind: 'loseTopic' as const }) },
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant('silentDrop' as const),
        count: fc.integer({ min: 1, max: 3 }),
      }),
    },
    { weight: 2, arbitrary: fc.constant({ kind: 'replyLate' as const }) },
    { weight: 2, arbitrary: fc.constant({ kind: 'observe' as const }) },
    {
      weight: 1,
      arbitrary: fc.record({ kind: fc.constant('unobserve' as const), which: fc.nat() }),
    },
  );
  // Full-length runs: at fast-check's default size a run is ~7 steps (a late reply 22 times in
  // 150 runs, a hole past the resync budget never).
  return fc.array(op, { minLength: 1, maxLength: 40, size: 'max' });
}

const turn = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

const clients: RpcClient[] = [];
const subscriptions: Subscription[] = [];
/** Unsubscribe every Observer and close every client of the last run. */
async function cleanUp(): Promise<void> {
  for (const s of subscriptions.splice(0)) s.unsubscribe();
  await Promise.all(clients.splice(0).map((c) => c.close()));
}
afterEach(cleanUp);

interface Observed {
  index: number;
  events: SubscriptionEvent<unknown>[];
  errors: unknown[];
  subscription: Subscription;
  active: boolean;
}

/**
 * Check one Observer's events against the model: from its position, each message is the next
 * seq after the last one accounted for (a gap signal accounts for its count; `null` starts a
 * later numbering from 0), carries that seq's data, and appears once. An Observer whose start
 * its client never learnt (`unknownStart`) may be told so by a `null` gap before its first
 * message: the next message then only has to come after its start.
 */
function accountingProblem(
  observed: Observed,
  start: { seq: number; epoch: number } | undefined,
  unknownStart = false,
): string | undefined {
  if (observed.errors.length > 0)
    return `observer ${observed.index} failed: ${String(observed.errors[0])}`;
  if (observed.events.length === 0) return undefined;
  if (!start) return `observer ${observed.index} got events but never read its position`;
  let accounted = start.seq;
  let epoch = start.epoch;
  let numberedAnew = false;
  let unknownCount = false;
  for (const [i, event] of observed.events.entries()) {
    const where = `observer ${observed.index}, event #${i} ${JSON.stringify(event)} (accounted ${accounted}, epoch ${epoch})`;
    if (event.gap !== undefined) {
      if (event.gap === null && unknownStart && i === 0) {
        unknownCount = true;
      } else if (event.gap === null) {
        numberedAnew = true;
        accounted = 0;
      } else {
        if (!(event.gap > 0)) return `${where}: a gap signal must count at least one message`;
        accounted += event.gap;
      }
      continue;
    }
    const [e, s] = String(event.data).split(':').map(Number) as [number, number];
    if (event.seq !== s) return `${where}: seq does not match the data`;
    if (unknownCount) {
      unknownCount = false;
      if (e < epoch || (e === epoch && s <= accounted))
        return `${where}: after an unknown start, a message from before the start`;
      // A gap:null after the unknown start's (the topic numbered anew meanwhile) is answered by
      // this same message, which starts the accounting afresh: it must be of a later numbering.
      if (numberedAnew && !(e > epoch))
        return `${where}: a gap:null must be followed by a later numbering`;
      numberedAnew = false;
      epoch = e;
      accounted = s;
      continue;
    }
    if (numberedAnew) {
      if (!(e > epoch)) return `${where}: a gap:null must be followed by a later numbering`;
      epoch = e;
      numberedAnew = false;
    } else if (e !== epoch) {
      return `${where}: a message of another numbering without a gap:null before it`;
    }
    if (s !== accounted + 1 + (event.missed ?? 0)) {
      return `${where}: expected seq ${accounted + 1}: ${s <= accounted ? 'duplicate or reordered' : `${s - accounted - 1} missed without a word`}`;
    }
    accounted = s;
  }
  return undefined;
}

function lastAccounted(
  observed: Observed,
  start: { seq: number; epoch: number },
): { seq: number; epoch: number } {
  let accounted = start.seq;
  let epoch = start.epoch;
  for (const event of observed.events) {
    if (event.gap === null) accounted = 0;
    else if (event.gap !== undefined) accounted += event.gap;
    else {
      accounted = event.seq!;
      epoch = Number(String(event.data).split(':')[0]);
    }
  }
  return { seq: accounted, epoch };
}

async function run(historyMax: number, script: Op[]): Promise<void> {
  const server = new ModelServer(historyMax);
  const world = new World(server);
  const client = new RpcClient({
    url: 'ws://model',
    WebSocket: world.webSocketClass(),
    reconnect: { initialDelayMs: 1, maxDelayMs: 2, jitter: 0 },
    heartbeat: false,
    callTimeoutMs: 0,
    logger: silentLogger,
  });
  clients.push(client);
  const observed: Observed[] = [];
  const observe = (): void => {
    const o: Observed = {
      index: observed.length,
      events: [],
      errors: [],
      active: true,
      subscription: undefined as unknown as Subscription,
    };
    // Params unique to the Observer: its own wire subscription, so the model knows whose
    // position a frame carries.
    o.subscription = client.subscribeWithMeta(TOPIC, { o: o.index }).subscribe({
      next: (event) => o.events.push(event),
      error: (err: unknown) => o.errors.push(err),
    });
    subscriptions.push(o.subscription);
    observed.push(o);
  };
  observe();
  await turn();

  for (const op of script) {
    switch (op.kind) {
      case 'publish':
        server.publish(op.count);
        break;
      case 'read':
        world.current?.read(op.count);
        break;
      case 'drop':
        world.current?.lose();
        break;
      case 'loseTopic':
        server.loseTopic();
        break;
      case 'silentDrop':
        server.silentDrops += op.count;
        break;
      case 'replyLate':
        server.replyLate = true;
        break;
      case 'observe':
        observe();
        break;
      case 'unobserve': {
        const active = observed.filter((o) => o.active);
        const o = active[op.which % Math.max(1, active.length)];
        if (o && active.length > 1) {
          o.active = false;
          o.subscription.unsubscribe();
        }
        break;
      }
    }
    await turn();
  }

  // Quiet end: faults off, everything read until nothing moves (the client connected and
  // subscribed), then one more message that every active Observer must end with.
  server.silentDrops = 0;
  server.replyLate = false;
  const settle = async (): Promise<void> => {
    let idle = 0;
    for (let round = 0; idle < 3; round++) {
      if (round > 2_000) throw new Error('the client never settled');
      await turn();
      const socket = world.current;
      if (!socket) {
        idle = 0;
        continue;
      }
      if (socket.outbound.length > 0) {
        socket.read(Number.MAX_SAFE_INTEGER);
        idle = 0;
      } else idle++;
    }
  };
  await settle();
  server.publish(1);
  await settle();

  for (const o of observed) {
    const problem = accountingProblem(
      o,
      world.starts.get(o.index),
      world.unknownStarts.has(o.index),
    );
    if (problem) throw new Error(problem);
    if (!o.active) continue;
    const start = world.starts.get(o.index);
    if (!start) throw new Error(`observer ${o.index} never read its position`);
    const last = lastAccounted(o, start);
    if (last.epoch !== server.epoch || last.seq !== server.lastSeq) {
      throw new Error(
        `observer ${o.index} stopped at ${last.epoch}:${last.seq}, the topic is at ${server.epoch}:${server.lastSeq}`,
      );
    }
  }
}

describe('client subscription state: model-based', () => {
  it('every message exactly once in order, or inside a gap signal, under any interleaving', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 400 }), ops(300), async (historyMax, script) => {
        try {
          await run(historyMax, script);
        } finally {
          await cleanUp();
        }
      }),
      {
        numRuns: Number(process.env.MODEL_RUNS ?? 150),
        examples: [
          // Holes past the resync budget (5 a minute): the sixth is told as a gap of its size.
          [
            400,
            [
              { kind: 'read', count: 10 },
              ...Array.from({ length: 6 }, (): Op[] => [
                { kind: 'silentDrop', count: 1 },
                { kind: 'publish', count: 2 },
                { kind: 'read', count: 10 },
                { kind: 'read', count: 10 },
              ]).flat(),
            ],
          ],
          // An unknown start, then the topic numbered anew before any message: two gap:null
          // signals, answered by one message of the new numbering.
          [
            1,
            [
              { kind: 'read', count: 1 },
              { kind: 'drop' },
              { kind: 'read', count: 1 },
              { kind: 'read', count: 1 },
              { kind: 'loseTopic' },
              { kind: 'publish', count: 1 },
              { kind: 'silentDrop', count: 1 },
            ],
          ],
          // A subscribe's notifications read before its reply (kept, then taken in order).
          [
            1,
            [
              { kind: 'observe' },
              { kind: 'loseTopic' },
              { kind: 'read', count: 4 },
              { kind: 'drop' },
              { kind: 'replyLate' },
              { kind: 'publish', count: 1 },
            ],
          ],
        ],
      },
    );
  }, 120_000);

  it('a subscription accepted but lost before its position was read: what was published meanwhile is replayed or told', async () => {
    // The reply is read (the subscription is live on the server, its status 'subscribed'), the
    // position is not; messages are published while the client is away.
    for (const published of [0, 1, 5]) {
      const script: Op[] = [
        { kind: 'read', count: 1 },
        { kind: 'drop' },
        { kind: 'publish', count: published },
      ];
      try {
        await run(1_000, script);
      } finally {
        await cleanUp();
      }
    }
  });

  it('a resume replay of up to 100 000 messages read with its reply in one read', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 257, max: 100_000 }),
        fc.integer({ min: 0, max: 1_000 }),
        async (behind, extra) => {
          const script: Op[] = [
            { kind: 'read', count: 10 }, // the reply and the position
            { kind: 'drop' },
            { kind: 'publish', count: behind },
            // Reconnected meanwhile (one turn per step): the resubscribe's reply and the whole
            // replay wait on the socket, and are taken off in one read.
            { kind: 'read', count: behind + extra + 10 },
          ];
          try {
            await run(100_000, script);
          } finally {
            await cleanUp();
          }
        },
      ),
      { numRuns: 8 },
    );
  }, 120_000);
});
