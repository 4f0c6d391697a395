/**
 * Property-based fuzzing of a live gateway over real WebSockets.
 *
 * Every generated frame is sent on a raw `ws` socket, each followed by an
 * `rpc.ping` (pipelined: a run sends all its frames and pings at once). The
 * replies are then checked against the model of the specification in
 * test/support/jsonrpc-model.ts, given the gateway's methods and limits:
 * every reply is a well-formed Response (or a non-empty array of them),
 * every request with a valid id gets exactly one reply with that id
 * and the expected result or error code, notifications and responses get
 * nothing, and the only frames besides those are the pongs, in order. Frames
 * over maxMessageBytes must close the socket with 1009, a binary frame with 1003
 * (JSON travels in text frames) and invalid UTF-8 in a text frame with 1007; the
 * socket is then replaced by a new one. A twin gateway with binaryJsonFrames: 'text'
 * must read binary frames as UTF-8 JSON text instead.
 *
 * Then the surfaces hardened in round two (issue 14), each against gateways of their own:
 * topic names of any length around maxTopicNameBytes, multi-byte UTF-8, lone surrogates and
 * the bytes Redis keys and NATS subjects treat specially, subscribed under a prefix topic on
 * the memory, Redis and NATS brokers (the last two when reachable), each answered with a
 * subscription that a publish reaches (names with a lone surrogate aside: see
 * subscribeNames) or a precise -32602 / -32005 with { limit, bytes };
 * Cookie headers with repeated names, odd spacing, parts without "=" and several header
 * lines, on the upgrade and on a POST, of which authenticate must see each name's first
 * value; and NDJSON requests over TCP cut into any chunks (inside UTF-8 sequences and CRLF
 * included), which must get the answers one write gets.
 */
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect } from '@nats-io/transport-node';
import fc from 'fast-check';
import { WebSocket } from 'ws';
import type { RawData } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidParamsError, JsonRpcError } from '../../src/protocol/errors.js';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { Gateway } from '../../src/server/gateway.js';
import { defaultLimits } from '../../src/server/options.js';
import { NATS_URL, REDIS_URL, deleteRedisKeys } from '../support/brokers.js';
import { inCi } from '../support/environment.js';
import { pooledId, validId, wrongTypeValue } from '../support/jsonrpc-arbitraries.js';
import {
  analyseFrame,
  classifyMember,
  expectedUnit,
  isPlainObject,
  jsonEqual,
  members,
  own,
  perfectMatching,
  replyProblem,
  roundTrip,
  unitMatches,
} from '../support/jsonrpc-model.js';
import type {
  Analysed,
  FrameLimits,
  Id,
  Json,
  Outcome,
  Service,
  Unit,
} from '../support/jsonrpc-model.js';
import { Resources } from '../support/resources.js';
import { sleep } from '../support/promises.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitUntil } from '../support/waiting.js';
import { startGateway } from '../support/gateway.js';
import { canConnect } from '../support/network.js';

const MAX_BYTES = 64 * 1024;
const MAX_DEPTH = 32;
const MAX_BATCH = 20;
/** The gateway's default: texts past 2 x this many characters are counted before parsing. */
const MAX_VALUES = 10_000;
/** The property a successful prototype-pollution attempt would add to every object. */
const CANARY = 'fuzzPolluted';
/** In the message of the Error `boom` throws: it must never reach the wire. */
const SECRET = 'SECRET-boom-detail';
/** Ids of the test's own pings; generated ids never start with a NUL. */
const PING_PREFIX = '\u0000fuzz-ping:';
/** A hang guard, not a performance threshold: a reply that never comes fails the run. */
const WAIT_MS = 10_000;

// ---------------------------------------------------------------------------
// The gateway under test
// ---------------------------------------------------------------------------

const res = new Resources();
let gateway: Gateway;
let url = '';
/** The same gateway with binaryJsonFrames: 'text': it reads binary frames as UTF-8 JSON text. */
let textTwinUrl = '';
let httpUrl = '';
let connectedCount = 0;
let disconnectedCount = 0;
/** Handler params that still held a `__proto__` key or a `constructor` with a `prototype`. */
let dangerousSeen = 0;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
const prototypeNames = Object.getOwnPropertyNames(Object.prototype).sort();

/** Counts what safe parsing should have removed before a handler sees the params. */
function inspect(params: unknown): void {
  const stack: unknown[] = [params];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      stack.push(...(node as unknown[]));
      continue;
    }
    if (own(node, '__proto__')) dangerousSeen++;
    const ctor = own(node, 'constructor') ? (node as { constructor: unknown }).constructor : null;
    if (ctor !== null && typeof ctor === 'object' && 'prototype' in ctor) dangerousSeen++;
    for (const key of Object.keys(node)) stack.push((node as Record<string, unknown>)[key]);
  }
}

/**
 * The classic vulnerable deep merge: it reads `target[key]` through the
 * prototype chain, so a surviving `__proto__` key would write to Object.prototype.
 */
function naiveMerge(target: Record<string, unknown>, source: Record<string, unknown>) {
  for (const key of Object.keys(source)) {
    const value = source[key];
    if (isPlainObject(value)) {
      const existing = target[key];
      const base = existing !== null && typeof existing === 'object' ? existing : {};
      target[key] = naiveMerge(base as Record<string, unknown>, value);
    } else {
      target[key] = value;
    }
  }
  return target;
}

function delayOf(params: unknown): number {
  return (JSON.stringify(params ?? null)?.length ?? 0) % 3;
}

/** The methods the model's `requestOutcomes` describes, on `gateway`. */
function serveFuzzMethods(gateway: Gateway): void {
  gateway.connected$.subscribe(() => connectedCount++);
  gateway.disconnected$.subscribe(() => disconnectedCount++);
  gateway.method('echo', (params: unknown) => {
    inspect(params);
    return params;
  });
  gateway.method('merge', (params: unknown) => {
    inspect(params);
    return isPlainObject(params) ? naiveMerge({}, params) : params;
  });
  gateway.method('boom', () => {
    throw new Error(SECRET);
  });
  gateway.method('later', async (params: unknown) => {
    inspect(params);
    await sleep(delayOf(params));
    return params;
  });
  gateway.method('laterFail', async (params: unknown) => {
    await sleep(delayOf(params));
    throw new InvalidParamsError('laterFail always fails');
  });
}

beforeAll(async () => {
  process.on('unhandledRejection', onUnhandled);
  const limits = {
    maxMessageBytes: MAX_BYTES,
    maxDepth: MAX_DEPTH,
    maxBatch: MAX_BATCH,
    maxJsonValues: MAX_VALUES,
    ratePerSecond: 0,
    maxInFlight: 100_000,
    maxConnectionsPerIp: 10_000,
    connectionsPerSecondPerIp: 0,
  };
  const running = await res.gateway({ limits });
  gateway = running.gateway;
  url = running.url;
  httpUrl = running.httpUrl;
  serveFuzzMethods(gateway);
  const twin = await res.gateway({ limits, binaryJsonFrames: 'text' });
  textTwinUrl = twin.url;
  serveFuzzMethods(twin.gateway);
});

afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  live?.discard();
  await res.cleanup();
});

// ---------------------------------------------------------------------------
// Raw sockets: one live at a time, replaced when the server closes it
// ---------------------------------------------------------------------------

interface Arrival {
  text: string;
  binary: boolean;
  value: unknown;
  parsed: boolean;
}

const stats = {
  runs: 0,
  frames: 0,
  replies: 0,
  sockets: 0,
  closes: new Map<number, number>(),
  /** What the model expected, by kind: coverage of the generators. */
  expected: new Map<string, number>(),
};

function count(kind: string): void {
  stats.expected.set(kind, (stats.expected.get(kind) ?? 0) + 1);
}

class FuzzSocket {
  readonly inbox: Arrival[] = [];
  pongs = 0;
  closeInfo: { code: number; reason: string } | undefined;
  private discarded = false;
  private readonly waiters = new Set<() => void>();

  constructor(
    readonly socket: WebSocket,
    readonly url: string,
  ) {
    socket.on('message', (data: RawData, isBinary: boolean) => {
      const buffer = Buffer.isBuffer(data)
        ? data
        : Array.isArray(data)
          ? Buffer.concat(data)
          : Buffer.from(data);
      const text = buffer.toString('utf8');
      let value: unknown;
      let parsed = true;
      try {
        value = JSON.parse(text);
      } catch {
        parsed = false;
      }
      if (isPong(value)) this.pongs++;
      this.inbox.push({ text, binary: isBinary, value, parsed });
      this.wake();
    });
    socket.on('error', () => undefined);
    socket.on('close', (code: number, reason: Buffer) => {
      this.closeInfo = { code, reason: reason.toString('utf8') };
      if (!this.discarded) stats.closes.set(code, (stats.closes.get(code) ?? 0) + 1);
      this.wake();
    });
  }

  static open(to: string): Promise<FuzzSocket> {
    const socket = res.track(new WebSocket(to, { perMessageDeflate: false }));
    stats.sockets++;
    return new Promise((resolve, reject) => {
      socket.once('open', () => resolve(new FuzzSocket(socket, to)));
      socket.once('error', reject);
    });
  }

  get isOpen(): boolean {
    return this.closeInfo === undefined && this.socket.readyState === WebSocket.OPEN;
  }

  /** Cut the socket off after a failed run, so shrinking starts from a clean state. */
  discard(): void {
    this.discarded = true;
    this.socket.terminate();
  }

  until(predicate: () => boolean, what: string): Promise<void> {
    if (predicate()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (!predicate()) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`timed out waiting for ${what}; got ${preview(this.inbox)}`));
      }, WAIT_MS);
      this.waiters.add(check);
    });
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}

let live: FuzzSocket | undefined;

async function liveSocket(): Promise<FuzzSocket> {
  if (live?.isOpen && live.url !== target.url()) {
    live.discard(); // nothing is owed on it: the last run checked everything it was sent
    live = undefined;
  }
  if (!live?.isOpen) live = await FuzzSocket.open(target.url());
  return live;
}

function isPong(value: unknown): boolean {
  return (
    isPlainObject(value) && typeof value['id'] === 'string' && value['id'].startsWith(PING_PREFIX)
  );
}

function preview(arrivals: readonly Arrival[]): string {
  const texts = arrivals.map((a) => (a.text.length > 300 ? `${a.text.slice(0, 300)}...` : a.text));
  return `${arrivals.length} frame(s): ${texts.join(' | ')}`;
}

// ---------------------------------------------------------------------------
// Frames, and what this gateway's methods answer (the rest is test/support/jsonrpc-model.ts)
// ---------------------------------------------------------------------------

/** One outgoing WebSocket message, optionally split into fragments. */
interface Outgoing {
  bytes: Uint8Array;
  binary: boolean;
  /** Fragment boundaries (byte offsets); empty sends one frame. */
  cuts: number[];
  /** Send a WebSocket ping between fragments. */
  controlPings: boolean;
  /** For failure reports. */
  label: string;
}

const LIMITS: FrameLimits = {
  maxBytes: MAX_BYTES,
  maxDepth: MAX_DEPTH,
  maxBatch: MAX_BATCH,
  maxJsonValues: MAX_VALUES,
};

/** Where the runs go (the gateway under test, or its twin), and the limits the model applies. */
let target: { url: () => string; limits: FrameLimits } = { url: () => url, limits: LIMITS };

function analyse(frame: Outgoing): Analysed {
  return analyseFrame(frame.bytes, frame.binary, target.limits);
}

/** Ids named by `rpc.cancel` notifications: those calls may answer -32001 instead. */
function cancelledIds(analysed: readonly Analysed[]): Set<Id> {
  const ids = new Set<Id>();
  for (const a of analysed) {
    if (!('value' in a)) continue;
    for (const m of members(a.value, LIMITS)) {
      const c = classifyMember(m);
      if (c.kind !== 'notification' || c.method !== 'rpc.cancel' || !isPlainObject(c.params))
        continue;
      const id = c.params['id'];
      if (typeof id === 'string' || typeof id === 'number') ids.add(id);
    }
  }
  return ids;
}

function requestOutcomes(method: string, params: Json, cancellable: boolean): Outcome[] {
  const maybeCancelled = (outcomes: Outcome[]): Outcome[] =>
    cancellable ? [...outcomes, { code: -32001 }] : outcomes;
  switch (method) {
    case 'rpc.ping':
      return [{ result: 'pong' }];
    case 'echo':
    case 'merge':
      return [{ result: roundTrip(params) }];
    case 'boom':
      return [{ code: -32603 }];
    case 'later':
      return maybeCancelled([{ result: roundTrip(params) }]);
    case 'laterFail':
      return maybeCancelled([{ code: -32602 }]);
    case 'subscribe':
      // No topic or stream is declared: every subscribe is refused (its handler is async).
      return maybeCancelled([{ code: -32602 }]);
    case 'unsubscribe': {
      const sid = Array.isArray(params)
        ? (params as unknown[])[0]
        : isPlainObject(params)
          ? params['subscription']
          : undefined;
      return typeof sid === 'string' ? [{ result: false }] : [{ code: -32602 }];
    }
    default:
      // Unknown methods, and every other rpc.* name.
      return [{ code: -32601 }];
  }
}

/** The gateway's methods; a call named by an rpc.cancel in the same run may answer -32001. */
function serviceFor(cancelled: Set<Id>): Service {
  return ({ method, params, id }) => requestOutcomes(method, params, cancelled.has(id));
}

function unitFor(a: Analysed, cancelled: Set<Id>): Unit | undefined {
  return expectedUnit(a, serviceFor(cancelled), LIMITS);
}

// ---------------------------------------------------------------------------
// Checking what came back
// ---------------------------------------------------------------------------

function fail(message: string, arrival?: Arrival): never {
  throw new Error(arrival ? `${message}: ${preview([arrival])}` : message);
}

/** Spec 5 / 5.1, and no details in an internal error (they stay in the server's log). */
function checkResponses(value: unknown, arrival: Arrival): void {
  const problem = replyProblem(value);
  if (problem) fail(problem, arrival);
  for (const r of [value].flat() as Record<string, unknown>[]) {
    const e = r['error'] as Record<string, unknown> | undefined;
    if (e?.['code'] === -32603 && (e['message'] !== 'Internal error' || own(e, 'data'))) {
      fail('an internal error carries details', arrival);
    }
  }
}

/** Every frame is JSON text, and is a Response or a non-empty array of Responses. */
function checkWellFormed(arrival: Arrival): void {
  if (arrival.binary) fail('a reply came as a binary frame', arrival);
  if (!arrival.parsed) fail('a reply is not JSON', arrival);
  if (arrival.text.includes(SECRET)) fail('a reply leaks an internal error message', arrival);
  checkResponses(arrival.value, arrival);
}

function checkNotPolluted(): void {
  if (CANARY in {}) fail(`Object.prototype.${CANARY} exists: the prototype was polluted`);
  const names = Object.getOwnPropertyNames(Object.prototype).sort();
  if (names.join() !== prototypeNames.join()) fail(`Object.prototype changed: ${names.join()}`);
  if (dangerousSeen > 0) fail(`${dangerousSeen} handler params kept a dangerous key`);
}

// ---------------------------------------------------------------------------
// Sending
// ---------------------------------------------------------------------------

let pingCounter = 0;

function sendFrame(socket: WebSocket, frame: Outgoing): void {
  const length = frame.bytes.length;
  const bounds = [...new Set([0, ...frame.cuts.map((c) => c % (length + 1)), length])].sort(
    (a, b) => a - b,
  );
  if (bounds.length <= 2) {
    socket.send(frame.bytes, { binary: frame.binary });
    return;
  }
  for (let i = 0; i + 1 < bounds.length; i++) {
    const last = i + 2 === bounds.length;
    socket.send(frame.bytes.subarray(bounds[i], bounds[i + 1]), {
      binary: frame.binary,
      fin: last,
    });
    if (frame.controlPings && !last) socket.ping();
  }
}

/**
 * Send `frames` pipelined, each followed by an rpc.ping, and check every
 * frame that comes back. A frame the model says closes the connection is sent
 * in a run of its own.
 */
async function exchange(frames: readonly Outgoing[]): Promise<void> {
  const analysed = frames.map(analyse);
  const closing = analysed.findIndex((a) => 'close' in a);
  if (closing >= 0 && frames.length > 1) {
    await exchange(frames.slice(0, closing));
    await exchange([frames[closing]!]);
    await exchange(frames.slice(closing + 1));
    return;
  }
  if (frames.length === 0) return;
  const conn = await liveSocket();
  try {
    if (conn.inbox.length > 0) fail(`unexpected frames between runs: ${preview(conn.inbox)}`);
    stats.runs++;
    stats.frames += frames.length;
    const pings: string[] = [];
    conn.pongs = 0;
    for (const frame of frames) {
      sendFrame(conn.socket, frame);
      const id = `${PING_PREFIX}${++pingCounter}`;
      pings.push(id);
      conn.socket.send(`{"jsonrpc":"2.0","method":"rpc.ping","id":${JSON.stringify(id)}}`);
    }
    const only = analysed[0]!;
    if ('close' in only) {
      // The ping after the frame is answered only by a gateway that read on instead of closing.
      await conn.until(() => conn.closeInfo !== undefined || conn.pongs > 0, `close ${only.close}`);
      if (!conn.closeInfo) {
        fail(
          `no ${only.close} close, answered instead (${frames[0]!.label}): ${preview(conn.inbox)}`,
        );
      }
      if (conn.closeInfo.code !== only.close) {
        fail(`closed with ${conn.closeInfo.code} instead of ${only.close} (${frames[0]!.label})`);
      }
      if (conn.inbox.length > 0)
        fail(`replies before a ${only.close} close: ${preview(conn.inbox)}`);
      return;
    }
    const cancelled = cancelledIds(analysed);
    const units = analysed
      .map((a) => unitFor(a, cancelled))
      .filter((u): u is Unit => u !== undefined);
    await conn.until(
      () =>
        conn.closeInfo !== undefined ||
        (conn.pongs >= pings.length && conn.inbox.length - conn.pongs >= units.length),
      `${pings.length} pong(s) and ${units.length} reply(ies)`,
    );
    if (conn.closeInfo) {
      fail(`the server closed the socket with ${conn.closeInfo.code}: ${preview(conn.inbox)}`);
    }
    for (const arrival of conn.inbox) checkWellFormed(arrival);
    const pongs = conn.inbox.filter((a) => isPong(a.value));
    const replies = conn.inbox.filter((a) => !isPong(a.value));
    pongs.forEach((pong, i) => {
      const r = pong.value as Record<string, unknown>;
      if (r['id'] !== pings[i] || r['result'] !== 'pong') fail(`pong ${i} is wrong`, pong);
    });
    if (replies.length !== units.length) {
      fail(`${replies.length} reply frame(s) where ${units.length} were due: ${preview(replies)}`);
    }
    if (!perfectMatching(units.length, (i, j) => unitMatches(replies[i]!.value, units[j]!))) {
      fail(
        `replies do not match the model.\nexpected: ${JSON.stringify(units).slice(0, 2000)}\n` +
          `got: ${preview(replies)}`,
      );
    }
    stats.replies += replies.length;
    for (const reply of replies) {
      for (const r of [reply.value].flat() as Record<string, { code?: number } | undefined>[]) {
        if (r['error']?.code === -32001) count('cancelled (-32001 received)');
      }
    }
    for (const a of analysed) {
      const unit = unitFor(a, cancelled);
      if (!unit) count('no reply');
      else if (unit.batch)
        count(`batch of ${unit.members.length > 5 ? '6+' : unit.members.length}`);
      else {
        const first = unit.member.outcomes[0]!;
        count('result' in first ? 'result' : String(first.code));
      }
    }
    checkNotPolluted();
    conn.inbox.length = 0;
    conn.pongs = 0;
  } catch (err) {
    conn.discard();
    if (live === conn) live = undefined;
    throw err;
  }
}

// ---------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------

function frameOf(text: string | Uint8Array, binary = false, label = 'frame'): Outgoing {
  const bytes = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  return printable({ bytes, binary, cuts: [], controlPings: false, label });
}

/** How fast-check prints a frame in a counterexample: short, readable. */
function describeFrame(this: Outgoing): string {
  const text = Buffer.from(this.bytes.buffer, this.bytes.byteOffset, this.bytes.length).toString(
    'utf8',
  );
  const shown = text.length > 200 ? `${text.slice(0, 200)}...(${this.bytes.length} bytes)` : text;
  const how = `${this.binary ? 'binary' : 'text'}${this.cuts.length > 0 ? ` cut at ${this.cuts.join(',')}` : ''}`;
  return `${this.label} [${how}] ${JSON.stringify(shown)}`;
}

function printable(frame: Outgoing): Outgoing {
  return Object.defineProperty(frame, fc.toStringMethod, { value: describeFrame });
}

/**
 * Now and then binary (`binaryWeight` to 30 text frames: on the gateway under test each binary
 * frame closes 1003 and costs a new socket), sometimes fragmented (with control frames in
 * between).
 */
function transported(
  payload: fc.Arbitrary<string | Uint8Array>,
  label: string,
  binaryWeight = 1,
): fc.Arbitrary<Outgoing> {
  return fc
    .record({
      payload,
      binary: fc.oneof(
        { arbitrary: fc.constant(false), weight: 30 },
        { arbitrary: fc.constant(true), weight: binaryWeight },
      ),
      cuts: fc.oneof(
        { arbitrary: fc.constant<number[]>([]), weight: 5 },
        { arbitrary: fc.array(fc.nat(), { minLength: 1, maxLength: 3 }), weight: 1 },
      ),
      controlPings: fc.boolean(),
    })
    .map(({ payload, binary, cuts, controlPings }) =>
      printable({ ...frameOf(payload, binary, label), cuts, controlPings }),
    );
}

function burst(frame: fc.Arbitrary<Outgoing>, maxLength = 6): fc.Arbitrary<Outgoing[]> {
  return fc.array(frame, { minLength: 1, maxLength });
}

function put(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

const METHODS = [
  'echo',
  'merge',
  'boom',
  'later',
  'laterFail',
  'subscribe',
  'unsubscribe',
  'missing',
  'rpc.ping',
  'rpc.cancel',
  'rpc.reconnect',
  'rpc.x',
  'constructor',
  '__proto__',
  'toString',
  'hasOwnProperty',
  '',
  'ECHO',
  'echo ',
];

const smallJson = fc.jsonValue({ maxDepth: 2 });

/** Params nested `levels` deep, alternating arrays and objects. */
function nestedValue(levels: number): Json {
  let value: Json = levels;
  for (let i = 0; i < levels; i++) value = i % 2 === 0 ? [value] : { k: value };
  return value;
}

const paramsArb: fc.Arbitrary<Json> = fc.oneof(
  { arbitrary: fc.array(smallJson, { maxLength: 4 }), weight: 3 },
  { arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), smallJson, { maxKeys: 4 }), weight: 3 },
  { arbitrary: fc.integer({ min: 1, max: MAX_DEPTH + 2 }).map(nestedValue), weight: 1 },
  {
    arbitrary: fc
      .tuple(fc.constantFrom('', 'topic', 'x'), smallJson)
      .map(([name, extra]) => [name, extra]),
    weight: 1,
  },
  { arbitrary: fc.record({ subscription: fc.oneof(fc.string(), smallJson) }), weight: 1 },
);

const methodArb = fc.oneof(
  { arbitrary: fc.constantFrom(...METHODS), weight: 8 },
  { arbitrary: fc.string({ maxLength: 12 }), weight: 1 },
);

const validRequest = fc.record(
  { jsonrpc: fc.constant('2.0'), method: methodArb, params: paramsArb, id: validId },
  { requiredKeys: ['jsonrpc', 'method'] },
);

const cancelNotification = fc
  .oneof(fc.record({ id: pooledId }), fc.array(pooledId, { maxLength: 2 }), smallJson)
  .map((params) => ({ jsonrpc: '2.0', method: 'rpc.cancel', params }));

const responseLike = fc.record(
  {
    jsonrpc: fc.constantFrom<Json>('2.0', '1.0', 2),
    result: smallJson,
    error: fc.oneof(
      fc.record({ code: fc.integer(), message: fc.string({ maxLength: 8 }) }),
      smallJson,
    ),
    id: fc.oneof(validId, wrongTypeValue),
  },
  { requiredKeys: [] },
);

const pollutionValue = fc.constantFrom<Json>(
  { [CANARY]: true },
  { toString: 'x', [CANARY]: 1 },
  [{ [CANARY]: true }],
  'scalar',
  null,
);

type Mutation =
  | { op: 'set'; key: string; value: Json }
  | { op: 'delete'; key: string }
  | { op: 'extra'; key: string; value: Json }
  | { op: 'proto'; where: 'top' | 'params'; value: Json }
  | { op: 'ctor'; where: 'top' | 'params' }
  | { op: 'id'; value: Json };

const FIELDS = ['jsonrpc', 'method', 'params', 'id'] as const;

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({
    op: fc.constant('set' as const),
    key: fc.constantFrom(...FIELDS),
    value: wrongTypeValue,
  }),
  fc.record({ op: fc.constant('delete' as const), key: fc.constantFrom(...FIELDS) }),
  fc.record({
    op: fc.constant('extra' as const),
    key: fc.oneof(
      fc.constantFrom('result', 'error', 'Jsonrpc', 'ID', 'meta', 'toString', 'constructor'),
      fc.string({ maxLength: 8 }),
    ),
    value: smallJson,
  }),
  fc.record({
    op: fc.constant('proto' as const),
    where: fc.constantFrom('top' as const, 'params' as const),
    value: pollutionValue,
  }),
  fc.record({
    op: fc.constant('ctor' as const),
    where: fc.constantFrom('top' as const, 'params' as const),
  }),
  fc.record({ op: fc.constant('id' as const), value: fc.oneof(validId, wrongTypeValue) }),
);

function applyMutations(base: Record<string, unknown>, mutations: readonly Mutation[]) {
  const msg: Record<string, unknown> = { ...base };
  const paramsObject = (): Record<string, unknown> => {
    const current = msg['params'];
    const copy: Record<string, unknown> = isPlainObject(current) ? { ...current } : {};
    put(msg, 'params', copy);
    return copy;
  };
  for (const m of mutations) {
    switch (m.op) {
      case 'set':
      case 'extra':
        put(msg, m.key, m.value);
        break;
      case 'id':
        put(msg, 'id', m.value);
        break;
      case 'delete':
        delete msg[m.key];
        break;
      case 'proto':
        put(m.where === 'top' ? msg : paramsObject(), '__proto__', m.value);
        break;
      case 'ctor':
        put(m.where === 'top' ? msg : paramsObject(), 'constructor', {
          prototype: { [CANARY]: true },
        });
        break;
    }
  }
  return msg;
}

const mutatedRequest = fc
  .tuple(validRequest, fc.array(mutationArb, { maxLength: 3 }))
  .map(([base, mutations]) => applyMutations(base, mutations));

const batchMember: fc.Arbitrary<Json> = fc.oneof(
  { arbitrary: validRequest, weight: 4 },
  { arbitrary: mutatedRequest, weight: 4 },
  { arbitrary: validRequest.map(({ id: _id, ...notification }) => notification), weight: 2 },
  { arbitrary: cancelNotification, weight: 1 },
  { arbitrary: responseLike, weight: 1 },
  { arbitrary: smallJson, weight: 1 },
);

const requestOrBatch: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: mutatedRequest.map((m) => JSON.stringify(m)), weight: 3 },
  { arbitrary: validRequest.map((m) => JSON.stringify(m)), weight: 1 },
  {
    arbitrary: fc.array(batchMember, { maxLength: 8 }).map((b) => JSON.stringify(b)),
    weight: 3,
  },
  {
    // Around maxBatch: the longest accepted batch, and one error for a longer one.
    arbitrary: fc
      .array(batchMember, { minLength: MAX_BATCH - 1, maxLength: MAX_BATCH + 2 })
      .map((b) => JSON.stringify(b)),
    weight: 1,
  },
);

type TextMutation =
  | { op: 'truncate'; at: number }
  | { op: 'delete'; at: number; length: number }
  | { op: 'insert'; at: number; text: string }
  | { op: 'duplicateId'; value: string };

const textMutation: fc.Arbitrary<TextMutation> = fc.oneof(
  fc.record({ op: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({
    op: fc.constant('delete' as const),
    at: fc.nat(),
    length: fc.integer({ min: 1, max: 4 }),
  }),
  fc.record({
    op: fc.constant('insert' as const),
    at: fc.nat(),
    text: fc.constantFrom(
      ',',
      '}',
      ']',
      '{',
      '[',
      '"',
      '\\',
      ':',
      'x',
      'null',
      '\u0000',
      ' ',
      '\uFEFF',
      '\ud800',
      '1e999',
    ),
  }),
  fc.record({
    op: fc.constant('duplicateId' as const),
    value: fc.constantFrom('"dup"', 'null', '7', '{}'),
  }),
);

function mutateText(text: string, mutations: readonly TextMutation[]): string {
  let out = text;
  for (const m of mutations) {
    const at = m.op === 'duplicateId' ? 0 : m.at % (out.length + 1);
    if (m.op === 'truncate') out = out.slice(0, at);
    else if (m.op === 'delete') out = out.slice(0, at) + out.slice(at + m.length);
    else if (m.op === 'insert') out = out.slice(0, at) + m.text + out.slice(at);
    else out = out.replace('"id":', `"id":${m.value},"id":`);
  }
  return out;
}

/** Id literals only raw text can carry: out of double range, -0, long mantissas. */
const rawIdLiteral = fc.constantFrom(
  '1e400',
  '-1e400',
  '1.5e-400',
  '-0',
  '0.0',
  '1E+2',
  '123456789012345678901234567890',
  '0.30000000000000004',
  '9007199254740993',
  '"\\u0000"',
  '"\\ud800"',
  '"\\u005f_proto__"',
);

const rawIdRequest = fc
  .tuple(rawIdLiteral, fc.constantFrom('echo', 'later', 'boom', 'rpc.ping', 'nope'))
  .map(([id, method]) => `{"jsonrpc":"2.0","method":"${method}","params":[${id}],"id":${id}}`);

/** A request, notification or batch of exactly `size` bytes, padded with `pad` characters. */
function sized(kind: string, size: number, pad: string): string {
  const make = (fill: string): string => {
    switch (kind) {
      case 'request':
        return JSON.stringify({ jsonrpc: '2.0', method: 'echo', params: [fill], id: 7 });
      case 'notification':
        return JSON.stringify({ jsonrpc: '2.0', method: 'echo', params: [fill] });
      case 'hugeId':
        return JSON.stringify({ jsonrpc: '2.0', method: 'rpc.ping', id: `h${fill}` });
      case 'batch':
        return JSON.stringify([
          { jsonrpc: '2.0', method: 'later', params: { fill }, id: 'big' },
          { jsonrpc: '2.0', method: 'echo', params: [1] },
          { jsonrpc: '2.0', method: 'boom', id: 2 },
        ]);
      default:
        return `not json ${fill}`;
    }
  };
  const room = size - Buffer.byteLength(make(''));
  if (room < 0) return make('');
  const unit = Buffer.byteLength(pad);
  const wide = Math.floor(room / unit / 2);
  return make(pad.repeat(wide) + 'x'.repeat(room - wide * unit));
}

const hugeFrame: fc.Arbitrary<Outgoing> = fc
  .record({
    kind: fc.constantFrom('request', 'notification', 'hugeId', 'batch', 'garbage'),
    offset: fc.oneof(
      { arbitrary: fc.integer({ min: -3, max: 3 }), weight: 4 },
      { arbitrary: fc.constantFrom(-1000, 1000, MAX_BYTES), weight: 1 },
    ),
    pad: fc.constantFrom('x', '\u00e9', '\u20ac', '\u{1F600}'),
    binary: fc.boolean(),
    cuts: fc.oneof(fc.constant<number[]>([]), fc.array(fc.nat(), { maxLength: 3 })),
  })
  .map(({ kind, offset, pad, binary, cuts }) =>
    printable({
      ...frameOf(sized(kind, MAX_BYTES + offset, pad), binary, `${kind} ${MAX_BYTES + offset}`),
      cuts,
      controlPings: cuts.length > 0,
    }),
  );

/** Text nesting `levels` deep, alternating arrays and objects, innermost a number. */
function nestedText(levels: number): string {
  let open = '';
  let close = '';
  for (let i = 0; i < levels; i++) {
    open += i % 2 === 0 ? '[' : '{"k":';
    close = (i % 2 === 0 ? ']' : '}') + close;
  }
  return `${open}0${close}`;
}

function deepText(shape: string, depth: number, id: Id): string {
  const head = `{"jsonrpc":"2.0","method":"echo","id":${JSON.stringify(id)}`;
  switch (shape) {
    case 'arrays':
      return '['.repeat(depth) + '1' + ']'.repeat(depth);
    case 'objects':
      return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
    case 'params':
      return `${head},"params":${nestedText(depth - 1)}}`;
    case 'notification':
      return `{"jsonrpc":"2.0","method":"echo","params":${nestedText(depth - 1)}}`;
    case 'batchMember':
      return `[${head},"params":${nestedText(depth - 2)}}]`;
    case 'unclosed':
      return '['.repeat(depth);
    case 'closedFirst':
      return ']'.repeat(depth) + '['.repeat(depth);
    case 'inString':
      return `${head},"params":["${'['.repeat(depth)}"]}`;
    case 'escapedQuote':
      return `${head},"params":["\\"${'{'.repeat(depth)}"]}`;
    default:
      // A string ending in an escaped backslash, then real nesting.
      return `${head},"params":["\\\\",${nestedText(depth - 2)}]}`;
  }
}

const deepFrame: fc.Arbitrary<Outgoing> = fc
  .record({
    shape: fc.constantFrom(
      'arrays',
      'objects',
      'params',
      'notification',
      'batchMember',
      'unclosed',
      'closedFirst',
      'inString',
      'escapedQuote',
      'backslashes',
    ),
    depth: fc.oneof(
      { arbitrary: fc.integer({ min: MAX_DEPTH - 3, max: MAX_DEPTH + 3 }), weight: 6 },
      { arbitrary: fc.constantFrom(2, 100, 1000, 20_000), weight: 1 },
    ),
    id: pooledId,
  })
  .map(({ shape, depth, id }) => frameOf(deepText(shape, depth, id), false, `${shape} ${depth}`));

/** Byte sequences that are not UTF-8. */
const badUtf8 = fc.constantFrom(
  [0xff],
  [0xc3],
  [0x80],
  [0xc0, 0x80],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf0, 0x9f, 0x98],
  [0xe2, 0x82],
  [0xfe, 0xfe, 0xff],
);

const invalidUtf8Frame: fc.Arbitrary<Outgoing> = fc
  .record({
    payload: fc.oneof(
      fc.tuple(validRequest, badUtf8, fc.nat()).map(([request, bad, at]) => {
        const text = Buffer.from(JSON.stringify(request));
        const cut = at % (text.length + 1);
        return Buffer.concat([text.subarray(0, cut), Buffer.from(bad), text.subarray(cut)]);
      }),
      fc.uint8Array({ minLength: 1, maxLength: 64 }),
    ),
    cuts: fc.oneof(fc.constant<number[]>([]), fc.array(fc.nat(), { maxLength: 3 })),
  })
  .map(({ payload, cuts }) =>
    printable({ ...frameOf(payload, false, 'invalid utf-8'), cuts, controlPings: true }),
  );

/** Keys and spellings aimed at Object.prototype. */
const pollutionText: fc.Arbitrary<string> = fc
  .record({
    method: fc.constantFrom('echo', 'merge', 'later'),
    id: fc.option(pooledId, { nil: undefined }),
    where: fc.constantFrom('params', 'nested', 'array', 'top'),
    key: fc.constantFrom('__proto__', 'constructor'),
    spelling: fc.constantFrom('plain', 'escaped', 'escapedLate'),
    batch: fc.boolean(),
  })
  .map(({ method, id, where, key, spelling, batch }) => {
    const payload: Json =
      key === '__proto__'
        ? { [CANARY]: true, toString: 'polluted' }
        : { prototype: { [CANARY]: true } };
    const evil: Record<string, unknown> = { safe: 1 };
    put(evil, key, payload);
    const params =
      where === 'nested' ? { a: { b: evil } } : where === 'array' ? [evil, [evil]] : evil;
    const msg: Record<string, unknown> = { jsonrpc: '2.0', method, params };
    if (where === 'top') put(msg, key, payload);
    if (id !== undefined) msg['id'] = id;
    let text = JSON.stringify(batch ? [msg, { ...msg, id: 'second' }] : msg);
    if (spelling === 'escaped') {
      text = text
        .replaceAll('"__proto__"', '"\\u005f_proto__"')
        .replaceAll('"constructor"', '"\\u0063onstructor"');
    } else if (spelling === 'escapedLate') {
      text = text
        .replaceAll('"__proto__"', '"__proto\\u005f_"')
        .replaceAll('"prototype"', '"\\u0070rototype"');
    }
    return text;
  });

const stringArb = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 64 }),
  fc.string({ unit: 'grapheme', maxLength: 32 }),
  fc.string({
    unit: fc.constantFrom(
      '[',
      ']',
      '{',
      '}',
      '"',
      '\\',
      ',',
      ':',
      '1',
      'e',
      '-',
      '.',
      ' ',
      'a',
      'u',
    ),
    maxLength: 80,
  }),
  fc.json({ maxDepth: 3 }).map((t) => `${t} `),
);

// ---------------------------------------------------------------------------
// The properties
// ---------------------------------------------------------------------------

const asyncRun = (frames: Outgoing[]): Promise<void> => exchange(frames);

describe('fuzzing a live gateway over WebSockets', () => {
  it('random bytes as binary frames close with 1003', async () => {
    const frame = transported(fc.uint8Array({ maxLength: 512 }), 'random bytes', 1000);
    await fc.assert(fc.asyncProperty(burst(frame, 8), asyncRun), { numRuns: 100 });
    expect(stats.closes.get(1003) ?? 0).toBeGreaterThan(0);
  });

  it("with binaryJsonFrames: 'text', binary frames are read as UTF-8 JSON text", async () => {
    const main = target;
    target = { url: () => textTwinUrl, limits: { ...main.limits, binaryFrames: 'text' } };
    try {
      const bytes = transported(fc.uint8Array({ maxLength: 512 }), 'random bytes', 1000);
      await fc.assert(fc.asyncProperty(burst(bytes, 8), asyncRun), { numRuns: 300 });
      const requests = transported(requestOrBatch, 'request', 30);
      await fc.assert(fc.asyncProperty(burst(requests), asyncRun), { numRuns: 200 });
    } finally {
      target = main;
    }
  });

  it('invalid UTF-8 in text frames closes with 1007', async () => {
    await fc.assert(fc.asyncProperty(burst(invalidUtf8Frame, 1), asyncRun), { numRuns: 150 });
    expect(stats.closes.get(1007) ?? 0).toBeGreaterThan(0);
  });

  it('random strings as text frames', async () => {
    await fc.assert(fc.asyncProperty(burst(transported(stringArb, 'string')), asyncRun), {
      numRuns: 500,
    });
  });

  it('random JSON values', async () => {
    const json = fc.jsonValue({ maxDepth: 5 }).map((v) => JSON.stringify(v));
    await fc.assert(fc.asyncProperty(burst(transported(json, 'json')), asyncRun), {
      numRuns: 500,
    });
  });

  // The longest property here (1 000 bursts): a harness bound for a loaded machine, not a speed check.
  it('mutated requests and batches of mixed members', { timeout: 90_000 }, async () => {
    await fc.assert(fc.asyncProperty(burst(transported(requestOrBatch, 'request')), asyncRun), {
      numRuns: 1000,
    });
  });

  it('text-level mutations of requests, and raw id literals', async () => {
    const mutated = fc.oneof(
      fc
        .tuple(requestOrBatch, fc.array(textMutation, { minLength: 1, maxLength: 3 }))
        .map(([text, mutations]) => mutateText(text, mutations)),
      rawIdRequest,
    );
    await fc.assert(fc.asyncProperty(burst(transported(mutated, 'mutated text')), asyncRun), {
      numRuns: 500,
    });
  });

  it('values close to and over maxMessageBytes', async () => {
    await fc.assert(fc.asyncProperty(burst(hugeFrame, 1), asyncRun), { numRuns: 150 });
    expect(stats.closes.get(1009) ?? 0).toBeGreaterThan(0);
  });

  it('nesting around maxDepth', async () => {
    await fc.assert(fc.asyncProperty(burst(deepFrame, 4), asyncRun), { numRuns: 300 });
  });

  it('prototype-pollution payloads', async () => {
    await fc.assert(fc.asyncProperty(burst(transported(pollutionText, 'pollution'), 4), asyncRun), {
      numRuns: 300,
    });
  });

  it('afterwards: alive, unpolluted, sessions accounted for, and a fresh client works', async () => {
    // Nothing late is still on its way: a last round trip on the fuzzing socket.
    await sleep(20);
    await exchange([frameOf('{"jsonrpc":"2.0","method":"echo","params":["last"],"id":"last"}')]);

    expect(unhandled).toEqual([]);
    checkNotPolluted();
    expect(({} as Record<string, unknown>)[CANARY]).toBeUndefined();

    // Only documented close codes, each where the model expected it.
    for (const code of stats.closes.keys()) expect([1000, 1003, 1007, 1009]).toContain(code);

    // The process and the gateway still serve.
    expect(gateway.isReady).toBe(true);
    expect((await fetch(`${httpUrl}/livez`)).status).toBe(200);
    expect((await fetch(`${httpUrl}/readyz`)).status).toBe(200);

    // Sessions: the one fuzzing socket is open; every other one has been released.
    await waitUntil(() => gateway.sessions.size === 1, 'one session left');
    await waitUntil(
      () => disconnectedCount === connectedCount - 1,
      'every closed socket disconnected',
    );
    expect(connectedCount).toBe(stats.sockets);

    const client = res.client(url);
    expect(await client.call('echo', [1, 'two', { three: 3 }])).toEqual([1, 'two', { three: 3 }]);
    await expect(client.call('boom')).rejects.toBeInstanceOf(JsonRpcError);
    expect(gateway.sessions.size).toBe(2);
    await client.close();
    live!.socket.close(1000);
    await waitUntil(() => gateway.sessions.size === 0, 'no session left');
    expect(disconnectedCount).toBe(connectedCount);

    console.log(
      `fuzz: ${stats.runs} runs, ${stats.frames} frames, ${stats.replies} reply frames, ` +
        `${stats.sockets} sockets, closes ${JSON.stringify(Object.fromEntries(stats.closes))}; ` +
        `expected ${JSON.stringify(Object.fromEntries([...stats.expected].sort()))}`,
    );
  });
});

// ---------------------------------------------------------------------------
// Issue 14's surfaces: topic names, Cookie headers, NDJSON chunked over TCP
// ---------------------------------------------------------------------------

const redisUp = inCi || (await canConnect(6379));
const natsUp = inCi || (await canConnect(4222));
/** Names every Redis key and NATS stream these gateways make; deleted afterwards. */
const runPrefix = `wsrpcfuzz${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;

const TOPIC_PREFIX = 'fz.';
/** The default bound on a topic name (UTF-8 bytes). */
const NAME_BYTES = defaultLimits.maxTopicNameBytes;
/** maxTopicBytesPerConnection here: four names near the bound reach it, so runs do. */
const TOPIC_BYTES_PER_CONNECTION = 4 * NAME_BYTES;

interface Surface {
  gateway: Gateway<string>;
  url: string;
  httpUrl: string;
  tcpPort: number;
  broker: Broker | undefined;
  /** What authenticate saw of each request's cookies (and its Cookie header), by its `run` query parameter. */
  cookiesSeen: Map<string, { cookies: Record<string, string>; header: string | undefined }>;
}

const surfaces: Surface[] = [];

/** A gateway for these properties: the prefix topic, echo and a late echo, TCP too. */
async function surfaceGateway(broker: Broker | undefined): Promise<Surface> {
  const cookiesSeen: Surface['cookiesSeen'] = new Map();
  const { gateway, url, httpUrl } = await startGateway<string>({
    ...(broker ? { broker } : {}),
    authenticate: ({ cookies, query, headers }) => {
      const run = query.get('run');
      if (run !== null) cookiesSeen.set(run, { cookies: { ...cookies }, header: headers.cookie });
      return 'fuzz';
    },
    limits: {
      maxTopicBytesPerConnection: TOPIC_BYTES_PER_CONNECTION,
      maxConnectionsPerIp: 10_000,
      connectionsPerSecondPerIp: 0,
      ratePerSecond: 0,
    },
  });
  gateway.topic(`${TOPIC_PREFIX}*`);
  gateway.method('echo', (params: unknown) => params);
  gateway.method('later', async (params: unknown) => {
    await sleep(delayOf(params));
    return params;
  });
  const { port: tcpPort } = await gateway.listenTcp(0, '127.0.0.1');
  const surface = { gateway, url, httpUrl, tcpPort, broker, cookiesSeen };
  surfaces.push(surface);
  return surface;
}

/** A RawRpc that is terminated (and awaited) when `use` is done. */
async function withRaw<T>(url: string, use: (raw: RawRpc) => Promise<T>): Promise<T> {
  const raw = await RawRpc.open(url);
  try {
    return await use(raw);
  } finally {
    raw.socket.terminate();
    await raw.closed;
  }
}

/** Characters Redis keys and channels, NATS subjects and stream names treat specially, or that are more than one byte. */
const AWKWARD = [
  ' ',
  '\t',
  '\r',
  '\n',
  '\u0000',
  '.',
  '*',
  '>',
  '$',
  '_',
  '-',
  ':',
  '{',
  '}',
  '[',
  '?',
  '\\',
  '/',
  '"',
  '%',
  '#',
  '\u007f',
  '\u0085',
  '\u00a0',
  '\u00e9',
  '\u20ac',
  '\u2028',
  '\ufeff',
  '\uffff',
  '\u{1F600}',
  '\u{10FFFF}',
  '\ud800',
  '\udfff',
];

const nameUnit = fc.oneof(
  { arbitrary: fc.constantFrom(...AWKWARD), weight: 3 },
  { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), weight: 2 },
  { arbitrary: fc.constantFrom('a', 'Z', '7'), weight: 1 },
);

/** `fz.` then `units` over and over, to `target` UTF-8 bytes (padded with 'a' where a unit would pass it). */
function topicNameOf(target: number, units: readonly string[]): string {
  let name = TOPIC_PREFIX;
  let bytes = Buffer.byteLength(name);
  for (let i = 0; bytes < target; i++) {
    const unit = units[i % units.length]!;
    const size = Buffer.byteLength(unit);
    if (bytes + size > target) {
      name += 'a'.repeat(target - bytes);
      break;
    }
    name += unit;
    bytes += size;
  }
  return name;
}

const topicNameArb = fc
  .record({
    target: fc.oneof(
      { arbitrary: fc.integer({ min: NAME_BYTES - 6, max: NAME_BYTES + 6 }), weight: 4 },
      { arbitrary: fc.integer({ min: 0, max: 48 }), weight: 3 },
      { arbitrary: fc.constantFrom(2 * NAME_BYTES, 4_096, 65_536), weight: 1 },
    ),
    units: fc.array(nameUnit, { minLength: 1, maxLength: 6 }),
  })
  .map(({ target, units }) => topicNameOf(target, units));

/** No lone surrogate: the string survives UTF-8 (String.prototype.isWellFormed, ES2024). */
function isWellFormed(text: string): boolean {
  return Buffer.from(text, 'utf8').toString('utf8') === text;
}

/** How a name reads in a failure: its size, and its start escaped. */
function describeName(name: string): string {
  return `${Buffer.byteLength(name)} B ${JSON.stringify(name.slice(0, 40))}`;
}

let published = 0;

/**
 * Subscribe `names` on one fresh connection, pipelined, and check each answer against the
 * limits: over maxTopicNameBytes -32602 { limit, bytes } (the name not echoed); past the
 * connection's maxTopicBytesPerConnection -32005 { limit, bytes }; else a subscription id,
 * which a publish to that name then reaches. A normal call is answered afterwards.
 */
async function subscribeNames(surface: Surface, names: readonly string[]): Promise<void> {
  await withRaw(surface.url, async (raw) => {
    const replies = await Promise.all(
      names.map((name, i) =>
        raw.request('subscribe', i % 2 === 0 ? [name] : { topic: name }, WAIT_MS),
      ),
    );
    let held = 0;
    const accepted: { name: string; id: string }[] = [];
    names.forEach((name, i) => {
      const reply = replies[i]!;
      const bytes = Buffer.byteLength(name);
      const got = `${describeName(name)}: ${JSON.stringify(reply).slice(0, 300)}`;
      if (bytes > NAME_BYTES) {
        if (reply.error?.code !== -32602) fail(`a name over the bound was not -32602: ${got}`);
        if (!jsonEqual(reply.error.data, { limit: NAME_BYTES, bytes })) fail(`wrong data: ${got}`);
        if (JSON.stringify(reply).length > 300) fail(`the refusal echoes the name: ${got}`);
        count('topic name -32602');
      } else if (!isWellFormed(name)) {
        // A lone surrogate would meet its U+FFFD twin on Redis or NATS (UTF-8): refused.
        if (reply.error?.code !== -32602) fail(`a lone surrogate was not -32602: ${got}`);
        count('topic name -32602 (lone surrogate)');
      } else if (held + bytes > TOPIC_BYTES_PER_CONNECTION) {
        if (reply.error?.code !== -32005) fail(`a name past the connection's bytes: ${got}`);
        const data = { limit: TOPIC_BYTES_PER_CONNECTION, bytes: held + bytes };
        if (!jsonEqual(reply.error.data, data)) fail(`wrong data: ${got}`);
        count('topic name -32005');
      } else {
        if (typeof reply.result !== 'string') fail(`a name within the bounds was refused: ${got}`);
        held += bytes;
        accepted.push({ name, id: reply.result });
        count('topic name accepted');
      }
    });
    // The first one accepted: a publish to its name reaches it, whatever the broker made of it.
    const first = accepted[0];
    if (first) {
      const payload = { published: ++published };
      await surface.gateway.publish(first.name, payload);
      await raw.until(
        () => raw.notifications(first.id).some((n) => jsonEqual(n.result, payload)),
        `a message published to ${describeName(first.name)}`,
        WAIT_MS,
      );
    }
    const echo = await raw.request('echo', ['after'], WAIT_MS);
    if (!jsonEqual(echo.result, ['after'])) fail(`echo after: ${JSON.stringify(echo)}`);
  });
}

/** Printable Latin-1 (what a header value can carry byte for byte), without ';'. */
const cookieChar = fc
  .oneof(
    { arbitrary: fc.integer({ min: 0x20, max: 0x7e }), weight: 6 },
    { arbitrary: fc.integer({ min: 0x80, max: 0xff }), weight: 1 },
    { arbitrary: fc.constant(0x09), weight: 1 },
  )
  .filter((code) => code !== 0x3b)
  .map((code) => String.fromCharCode(code));

/** A few names, so that repeats are common; and names an object's prototype has. */
const cookieName = fc.oneof(
  {
    arbitrary: fc.constantFrom(
      'token',
      'sid',
      'a',
      'A',
      '__proto__',
      'constructor',
      'toString',
      '__Host-id',
      '$Version',
      '1',
      '0',
      'x y',
      '',
    ),
    weight: 4,
  },
  {
    arbitrary: fc.string({ unit: cookieChar, maxLength: 6 }).map((s) => s.replace(/=/g, '')),
    weight: 1,
  },
);

const cookieValue = fc.oneof(
  { arbitrary: fc.string({ unit: cookieChar, maxLength: 12 }), weight: 3 },
  {
    arbitrary: fc.constantFrom(
      '"quoted"',
      '%41%42',
      '%E2%82%AC',
      '%',
      '%zz',
      '%E2%82',
      '%00',
      'a=b',
      '==',
      '',
    ),
    weight: 2,
  },
);

const spaces = fc.constantFrom('', '', ' ', '  ', '\t', ' \t ');

/** One `;`-separated part: name=value with odd spacing, a bare word with no `=`, or nothing. */
const cookiePart = fc.oneof(
  {
    arbitrary: fc
      .tuple(spaces, cookieName, spaces, spaces, cookieValue, spaces)
      .map(([a, name, b, c, value, d]) => `${a}${name}${b}=${c}${value}${d}`),
    weight: 6,
  },
  { arbitrary: fc.tuple(spaces, cookieName).map(([a, name]) => `${a}${name}`), weight: 1 },
  { arbitrary: fc.constant(''), weight: 1 },
);

/** The Cookie header as one line, or split into several Cookie lines (joined by the server with "; "). */
const cookieHeader = fc
  .record({
    parts: fc.array(cookiePart, { minLength: 1, maxLength: 10 }),
    lines: fc.integer({ min: 1, max: 3 }),
  })
  .map(({ parts, lines }) => {
    const size = Math.ceil(parts.length / lines);
    const out: string[] = [];
    for (let i = 0; i < parts.length; i += size) out.push(parts.slice(i, i + size).join(';'));
    return out;
  });

/** The header as the server reads it: each line without its outer blanks, lines joined by "; ". */
function receivedCookie(lines: readonly string[]): string {
  return lines.map((line) => line.replace(/^[ \t]+|[ \t]+$/g, '')).join('; ');
}

/** What the hook should see: each name once, with its first value (trimmed, %-decoded when valid). */
function expectedCookies(header: string): [string, string][] {
  const seen = new Map<string, string>();
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    if (seen.has(name)) continue;
    const raw = part.slice(eq + 1).trim();
    let value = raw;
    try {
      value = decodeURIComponent(raw);
    } catch {
      // Not %-encoding: kept as sent.
    }
    seen.set(name, value);
  }
  return [...seen].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

let cookieRuns = 0;

/** Upgrade (or POST) with `lines` as Cookie header(s); authenticate's view of them must match. */
async function sendCookies(surface: Surface, lines: string[], post: boolean): Promise<void> {
  const run = String(++cookieRuns);
  const headers = { cookie: lines.length === 1 ? lines[0]! : lines };
  if (post) {
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        `${surface.httpUrl}/rpc?run=${run}`,
        { method: 'POST', headers: { ...headers, 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          res.once('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.once('error', reject);
      // A Buffer: a string body would be written with the head as one UTF-8 string, turning
      // the header's Latin-1 characters into two bytes each; this way every byte is as meant.
      req.end(Buffer.from('{"jsonrpc":"2.0","method":"echo","params":["cookies"],"id":1}'));
    });
    if (status !== 200) fail(`the POST got ${status}`);
  } else {
    const socket = res.track(
      new WebSocket(`${surface.url}?run=${run}`, { headers, perMessageDeflate: false }),
    );
    const raw = await new Promise<WebSocket>((resolve, reject) => {
      socket.once('open', () => resolve(socket));
      socket.once('error', reject);
      socket.once('unexpected-response', (_req, response) =>
        reject(new Error(`the upgrade got ${response.statusCode}`)),
      );
    });
    raw.close(1000);
  }
  const seen = surface.cookiesSeen.get(run);
  surface.cookiesSeen.delete(run);
  if (!seen) fail('authenticate did not see the request');
  const got = Object.entries(seen.cookies).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const want = expectedCookies(receivedCookie(lines));
  if (!jsonEqual(got, want)) {
    fail(
      `cookies ${JSON.stringify(lines)} (received as ${JSON.stringify(seen.header)}): ` +
        `saw ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`,
    );
  }
  count(`cookies ${want.length > 3 ? '4+' : want.length}`);
}

/** One NDJSON line: a request, a notification, a batch, garbage (never JSON) or blanks. */
const ndjsonRequest = fc.record({
  jsonrpc: fc.constant('2.0'),
  method: fc.constantFrom('echo', 'later', 'nope', 'rpc.ping'),
  params: fc.array(
    fc.oneof(fc.string({ unit: 'binary', maxLength: 8 }), fc.integer(), fc.constant(null)),
    { maxLength: 3 },
  ),
  id: fc.oneof(fc.integer({ min: 0, max: 5 }), fc.string({ unit: 'binary', maxLength: 4 })),
});

type NdjsonLine = { text: string; answers: number };

const ndjsonLine: fc.Arbitrary<NdjsonLine> = fc.oneof(
  { arbitrary: ndjsonRequest.map((m) => ({ text: JSON.stringify(m), answers: 1 })), weight: 5 },
  {
    arbitrary: ndjsonRequest.map(({ id: _id, ...m }) => ({ text: JSON.stringify(m), answers: 0 })),
    weight: 1,
  },
  {
    arbitrary: fc
      .array(fc.tuple(ndjsonRequest, fc.boolean()), { minLength: 1, maxLength: 4 })
      .map((members) => ({
        text: JSON.stringify(members.map(([m, notify]) => (notify ? { ...m, id: undefined } : m))),
        answers: members.some(([, notify]) => !notify) ? 1 : 0,
      })),
    weight: 2,
  },
  {
    arbitrary: fc
      .string({ unit: 'binary', maxLength: 16 })
      .map((s) => ({ text: `#${s.replace(/[\n\r]/g, ' ')}`, answers: 1 })),
    weight: 1,
  },
  {
    arbitrary: fc.constantFrom('', '   ', '\t', '\r').map((text) => ({ text, answers: 0 })),
    weight: 1,
  },
);

/** `bytes` cut at `cuts` (offsets modulo the length, sorted, distinct). */
function chunked(bytes: Buffer, cuts: readonly number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const pieces: Buffer[] = [];
  let from = 0;
  for (const offset of [...at, bytes.length]) {
    if (offset > from) pieces.push(bytes.subarray(from, offset));
    from = Math.max(from, offset);
  }
  return pieces;
}

/** Write `pieces` on a new TCP connection (a turn between writes), half-close, and read every answer until the server closes. */
function tcpExchange(port: number, pieces: readonly Buffer[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.setNoDelay(true);
    const received: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('no end of the answers in time'));
    }, WAIT_MS);
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.once('error', reject);
    socket.once('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(received).toString('utf8');
      resolve(text.split('\n').filter((line) => line.length > 0));
    });
    socket.once('connect', () => {
      void (async () => {
        for (const piece of pieces) {
          socket.write(piece);
          await new Promise((next) => setImmediate(next));
        }
        socket.end();
      })();
    });
  });
}

/** Answers in a canonical order (async handlers may finish in any order). */
function canonical(lines: readonly string[]): string[] {
  return lines.map((line) => JSON.stringify(JSON.parse(line) as Json)).sort();
}

describe('fuzzing the surfaces hardened in round two (issue 14)', () => {
  let memory: Surface;
  const brokers: Broker[] = [];

  beforeAll(async () => {
    memory = await surfaceGateway(undefined);
  });

  afterAll(async () => {
    await Promise.all(surfaces.splice(0).map(({ gateway }) => gateway.close({ timeoutMs: 1_000 })));
    await Promise.all(brokers.splice(0).map((broker) => broker.close()));
    if (redisUp) await deleteRedisKeys(REDIS_URL, runPrefix);
    if (natsUp) {
      const nc = await natsConnect({ servers: NATS_URL });
      try {
        const jsm = await jetstreamManager(nc);
        const ours: string[] = [];
        for await (const name of jsm.streams.names()) {
          if (name.startsWith(`${runPrefix}_`)) ours.push(name);
        }
        await Promise.all(ours.map((name) => jsm.streams.delete(name)));
      } finally {
        await nc.close();
      }
    }
  });

  const topicRuns = fc.array(topicNameArb, { minLength: 1, maxLength: 10 });

  it('topic names of any bytes and length under a prefix topic (memory broker)', async () => {
    await fc.assert(
      fc.asyncProperty(topicRuns, (names) => subscribeNames(memory, names)),
      { numRuns: 80 },
    );
  });

  it.skipIf(!redisUp)(
    'topic names of any bytes and length under a prefix topic (Redis broker)',
    async () => {
      const broker = await RedisBroker.create({ url: REDIS_URL, prefix: `${runPrefix}:` });
      brokers.push(broker);
      const surface = await surfaceGateway(broker);
      await fc.assert(
        fc.asyncProperty(topicRuns, (names) => subscribeNames(surface, names)),
        { numRuns: 30 },
      );
    },
  );

  it.skipIf(!natsUp)(
    'topic names of any bytes and length under a prefix topic (NATS broker)',
    async () => {
      const broker = await NatsBroker.connect({ servers: NATS_URL, prefix: runPrefix });
      brokers.push(broker);
      const surface = await surfaceGateway(broker);
      await fc.assert(
        fc.asyncProperty(topicRuns, (names) => subscribeNames(surface, names)),
        { numRuns: 20 },
      );
    },
  );

  it('Cookie headers with repeats, odd spacing and parts without "=": authenticate sees the first value of each name', async () => {
    await fc.assert(
      fc.asyncProperty(cookieHeader, fc.boolean(), (lines, post) =>
        sendCookies(memory, lines, post),
      ),
      { numRuns: 150 },
    );
  });

  it('NDJSON over TCP cut into any chunks gets the answers one write gets', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(ndjsonLine, { minLength: 1, maxLength: 12 }),
        fc.boolean(),
        fc.boolean(),
        fc.array(fc.nat(), { minLength: 1, maxLength: 24 }),
        async (lines, crlf, trailingNewline, cuts) => {
          const text =
            lines.map((l) => l.text).join(crlf ? '\r\n' : '\n') + (trailingNewline ? '\n' : '');
          const bytes = Buffer.from(text, 'utf8');
          const whole = await tcpExchange(memory.tcpPort, [bytes]);
          const pieces = await tcpExchange(memory.tcpPort, chunked(bytes, cuts));
          const due = lines.reduce((n, l) => n + l.answers, 0);
          if (whole.length !== due) {
            fail(
              `one write got ${whole.length} answers where ${due} were due: ${whole.join(' | ')}`,
            );
          }
          if (!jsonEqual(canonical(pieces), canonical(whole))) {
            fail(`chunked: ${pieces.join(' | ')}\nwhole: ${whole.join(' | ')}`);
          }
          count(`ndjson ${due > 5 ? '6+' : due} answers`);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('afterwards: each gateway answers a call, holds no subscription, and every session is gone', async () => {
    for (const surface of surfaces) {
      await withRaw(surface.url, async (raw) => {
        expect((await raw.request('echo', ['still here'])).result).toEqual(['still here']);
      });
      await waitUntil(() => surface.gateway.sessions.size === 0, 'no session left');
      await waitUntil(
        () => Object.keys(surface.gateway.pubsub.topics()).length === 0,
        'no topic held',
      );
      expect(surface.gateway.isReady).toBe(true);
    }
    expect(unhandled).toEqual([]);
    console.log(
      `fuzz (issue 14 surfaces): ${JSON.stringify(
        Object.fromEntries(
          [...stats.expected].filter(([k]) => /^(topic|cookies|ndjson)/.test(k)).sort(),
        ),
      )}`,
    );
  });
});
