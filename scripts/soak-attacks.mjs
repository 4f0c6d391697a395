// The attack mix of the soak (scripts/soak.mjs) and its /livez prober. soak.mjs forks this file
// twice, `--attack` and `--probe`, so neither is slowed or timed by the event loop of the load
// generator (3,000 connections) nor by the other: an attack's timings (a socket refused "at
// once", cut "at the headers timeout") and the /livez latencies are the gateway's, not ours.
//
// Every attack comes from its own loopback address (every 127/8 address is loopback on
// Linux; `localAddress` picks one), so the per-address bounds it meets are its own:
//
//   127.0.0.2  half-sent upgrades: a cycle opens maxHttpSocketsPerIp sockets (200 by default)
//              that write an upgrade's first lines and never the blank line ending the
//              headers, then HALF_SENT_OVER more; the extra ones must be destroyed at once
//              (closed, not a byte answered, counted by the gateway as ip-limit refusals), the
//              others cut at the gateway's headersTimeoutMs (the soak sets it to 2 s so cycles
//              repeat within the run), never before it.
//   127.0.0.3  the /livez prober (every LIVEZ_INTERVAL_MS, a new connection each time).
//   127.0.0.4  aborted POST /rpc: the whole request, or its headers and half its body, then
//              the socket destroyed at once, while the gateway's async `authenticate` waits;
//              afterwards the address must hold no admission slot.
//   127.0.0.5  topic names: one connection subscribes `room.<...>` (a prefix topic) with names
//              over maxTopicNameBytes (256 bytes; up to 64 KiB, one- to four-byte characters),
//              each answered -32602 with data { limit, bytes }; every tenth name has exactly the
//              bound's size and is accepted, then unsubscribed; every FILL_EVERY_MS a fresh
//              connection subscribes maxTopicBytesPerConnection / maxTopicNameBytes names of
//              the bound's size (64), all accepted, and one more, refused -32005.
//   127.0.0.6  replays not read: every REPLAYS_EVERY_MS a connection subscribes to the soak's
//              `archive` topic (12,000 retained messages) with `since: 0` and never reads its
//              socket (paused before the reply comes); each is cut after REPLAY_HOLD_MS, so
//              three or four are paused at any time. (One at a time: on the memory broker a
//              history read is answered at once, so the gateway fills a socket's kernel buffers
//              in one turn of its loop, ~200 ms on 2 cores; reads made together are never
//              merged there, so starting two at once would only double that.)
//
// Each attack is a loop bounded in count (a maximum number of iterations) and in time (it
// starts nothing after its end time and waits for what it started, each wait bounded).

import { connect } from 'node:net';
import { request as httpRequest } from 'node:http';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket } from 'ws';

export const HOST = '127.0.0.1';

/** Where each attack comes from (the load itself uses 127.0.0.1). */
export const ADDRESSES = {
  halfSent: '127.0.0.2',
  probe: '127.0.0.3',
  posts: '127.0.0.4',
  names: '127.0.0.5',
  replays: '127.0.0.6',
};

/** The soak gateway's headersTimeoutMs: short, so that half-sent cycles repeat within a run. */
export const HEADERS_TIMEOUT_MS = 2_000;
/** What the soak gateway's async `authenticate` waits before it answers. */
export const AUTHENTICATE_DELAY_MS = 3;

/**
 * The topic replayed without reading. Its history is published before the baseline sample,
 * so the heap it takes is in every sample (and is reported, and kept out of the heap ratio).
 * A paused connection can hold, in kernel buffers, about the send buffer's maximum
 * (net.ipv4.tcp_wmem, 4 MiB) and the receive buffer's initial size (tcp_rmem, 128 KiB): about
 * 3,700 of these messages (measured; replayReadBound() computes a bound from /proc); the whole
 * history is 12,000, so a replay read in one go and one read a page at a time while the
 * socket has room are far apart.
 */
export const ARCHIVE = {
  topic: 'archive',
  messages: 12_000,
  payloadBytes: 1_000,
  highWaterMark: 64 * 1024,
  /** The gateway's first page (pubsub-resume FIRST_PAGE). */
  firstPage: 100,
};

/** /livez is polled this often, each poll on a new connection from ADDRESSES.probe. */
export const LIVEZ_INTERVAL_MS = 250;
/** A poll that takes longer is given up and counted as failed. */
export const LIVEZ_TIMEOUT_MS = 5_000;

/** Over-bound sockets opened per half-sent cycle, after the address's maxHttpSocketsPerIp. */
const HALF_SENT_OVER = 20;
/**
 * A held socket is cut "at the headers timeout" when it closes no later than this after the
 * timeout, counted from its connect (this process's lag, and the gateway's, make it later),
 * and no sooner than the timeout after its connect began (the gateway's timer cannot start
 * before that; soak.mjs allows for how stale the gateway's loop clock can be, see there).
 */
const CUT_LATE_SLACK_MS = 2_500;
/** One over-long name subscribe every this many ms (awaited: at most 20 per second). */
const NAMES_EVERY_MS = 50;
/** A fresh connection fills its topic-name bytes this often. */
const FILL_EVERY_MS = 5_000;
/** One aborted POST every this many ms, at most POSTS_IN_FLIGHT at once. */
const POSTS_EVERY_MS = 20;
const POSTS_IN_FLIGHT = 16;
/** An unread replay every this many ms, each held (paused) this long, then cut. */
const REPLAYS_EVERY_MS = 1_000;
const REPLAY_HOLD_MS = 3_000;
/** Any single wait of an attack on the gateway: a hang guard, not a threshold. */
const WAIT_MS = 15_000;

const HALF_UPGRADE =
  'GET /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
  'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n';

/**
 * The most messages of ARCHIVE one unread replay can make the gateway read from its broker: what
 * the kernel can hold for a paused connection (send buffer maximum plus receive buffer initial
 * size, read from /proc on Linux), the topic's high-water mark and the held-back live messages
 * (one more of each), in frames of at least the payload's size, plus the first page and the
 * page read when the socket had just dropped below its mark. Reading without a bound would be
 * the whole history.
 */
export function replayReadBound() {
  const field = (path, index, fallback) => {
    try {
      const value = Number(readFileSync(path, 'utf8').trim().split(/\s+/)[index]);
      return Number.isFinite(value) && value > 0 ? value : fallback;
    } catch {
      return fallback;
    }
  };
  const sendMax = field('/proc/sys/net/ipv4/tcp_wmem', 2, 4 * 1024 * 1024);
  const receiveInitial = field('/proc/sys/net/ipv4/tcp_rmem', 1, 128 * 1024);
  const bytes = sendMax + receiveInitial + 2 * ARCHIVE.highWaterMark;
  const page = Math.ceil(ARCHIVE.highWaterMark / ARCHIVE.payloadBytes);
  return {
    messages: Math.ceil(bytes / ARCHIVE.payloadBytes) + ARCHIVE.firstPage + page,
    sendMax,
    receiveInitial,
  };
}

// ---------------------------------------------------------------------------
// Small clients
// ---------------------------------------------------------------------------

/** A raw JSON-RPC WebSocket from `localAddress`: request() resolves with the reply message. */
async function rpcSocket(port, localAddress) {
  const socket = new WebSocket(`ws://${HOST}:${port}/rpc`, {
    localAddress,
    perMessageDeflate: false,
  });
  const pending = new Map();
  let nextId = 0;
  socket.on('error', () => undefined);
  const closed = new Promise((resolve) =>
    socket.once('close', () => {
      for (const settle of pending.values()) settle({ error: { code: 'closed' } });
      pending.clear();
      resolve();
    }),
  );
  socket.on('message', (data) => {
    let message;
    try {
      message = JSON.parse(data.toString('utf8'));
    } catch {
      return;
    }
    const settle = pending.get(message?.id);
    if (!settle) return;
    pending.delete(message.id);
    settle(message);
  });
  await new Promise((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  return {
    request(method, params) {
      const id = ++nextId;
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          resolve({ error: { code: 'timeout' } });
        }, WAIT_MS);
        pending.set(id, (message) => {
          clearTimeout(timer);
          resolve(message);
        });
        socket.send(JSON.stringify({ jsonrpc: '2.0', method, params, id }));
      });
    },
    async close() {
      socket.close(1000);
      const timer = setTimeout(() => socket.terminate(), WAIT_MS);
      await closed;
      clearTimeout(timer);
    },
  };
}

/**
 * A TCP connection from `localAddress` that writes `text` once connected. `connected` resolves
 * with the time it connected (undefined if it closed first); `closed` with what it saw. Times
 * are this process's: `startedAt` is taken before the connect, so the gateway cannot have seen
 * the socket earlier; `connectedAt` and `closedAt` are when this process got to the events,
 * which can be late when it is short of CPU, never early.
 */
function rawSocket(port, localAddress, text, { destroyAfterWrite = false } = {}) {
  const record = {
    startedAt: performance.now(),
    connectedAt: undefined,
    closedAt: undefined,
    received: '',
  };
  const socket = connect({ port, host: HOST, localAddress });
  socket.setEncoding('latin1');
  socket.on('error', () => undefined);
  socket.on('data', (chunk) => (record.received += chunk));
  const closed = new Promise((resolve) =>
    socket.once('close', () => {
      record.closedAt = performance.now();
      resolve(record);
    }),
  );
  const connected = new Promise((resolve) => {
    socket.once('connect', () => {
      record.connectedAt = performance.now();
      if (destroyAfterWrite) socket.write(text, () => socket.destroy());
      else socket.write(text);
      resolve(record.connectedAt);
    });
    void closed.then(() => resolve(undefined));
  });
  return { socket, record, connected, closed };
}

/** Resolves with `promise`'s value, or `fallback` after `ms` (no timer left behind). */
async function within(promise, ms, fallback) {
  const timeout = new AbortController();
  try {
    return await Promise.race([promise, sleep(ms, fallback, { signal: timeout.signal })]);
  } finally {
    timeout.abort();
  }
}

// ---------------------------------------------------------------------------
// The attacks
// ---------------------------------------------------------------------------

/** Characters of one to four UTF-8 bytes. */
const UNITS = ['x', '\u00e9', '\u20ac', '\u{1F600}'];

/** `room.<tag>.` then `unit` repeated (and 'x' to pad) to exactly `bytes` UTF-8 bytes. */
function topicName(tag, bytes, unit) {
  const head = `room.${tag}.`;
  const room = bytes - Buffer.byteLength(head);
  const size = Buffer.byteLength(unit);
  const count = Math.floor(room / size);
  return head + unit.repeat(count) + 'x'.repeat(room - count * size);
}

function isSubscriptionId(reply) {
  return typeof reply?.result === 'string';
}

function errorIs(reply, code, data) {
  const error = reply?.error;
  if (error?.code !== code) return false;
  return Object.entries(data).every(([key, value]) => error.data?.[key] === value);
}

function note(list, text) {
  if (list.length < 5) list.push(text);
}

async function topicNames(port, end, limits) {
  const bound = limits.maxTopicNameBytes;
  const perConnection = limits.maxTopicBytesPerConnection;
  const fill = Math.floor(perConnection / bound);
  const out = {
    overLong: 0,
    overLongRefused: 0,
    overLongBytes: 0,
    atBound: 0,
    atBoundAccepted: 0,
    fills: 0,
    fillsExact: 0,
    fillSize: fill,
    anomalies: [],
  };
  // Lengths over the bound: just over it, a few multiples, the 64 KiB extreme.
  const overSizes = [bound + 1, bound + 2, bound + 3, 2 * bound, 1024, 4096, 16_384, 65_536];
  const conn = await rpcSocket(port, ADDRESSES.names);
  let nextFill = Date.now() + FILL_EVERY_MS / 2;
  const maxIterations = Math.ceil((end - Date.now()) / NAMES_EVERY_MS) + 1;
  for (let i = 0; i < maxIterations && Date.now() < end; i++) {
    const unit = UNITS[i % UNITS.length];
    if (i % 10 === 0) {
      out.atBound++;
      const name = topicName(`b${i}`, bound, unit);
      const reply = await conn.request('subscribe', [name]);
      const gone = isSubscriptionId(reply)
        ? await conn.request('unsubscribe', [reply.result])
        : undefined;
      if (gone?.result === true) out.atBoundAccepted++;
      else note(out.anomalies, `a name of ${bound} bytes: ${JSON.stringify(reply).slice(0, 200)}`);
    } else {
      const bytes = overSizes[Math.floor(i / UNITS.length) % overSizes.length];
      const name = topicName(`o${i}`, bytes, unit);
      const exact = Buffer.byteLength(name);
      out.overLong++;
      out.overLongBytes += exact;
      const params = i % 3 === 0 ? { topic: name } : [name];
      const reply = await conn.request('subscribe', params);
      if (errorIs(reply, -32602, { limit: bound, bytes: exact })) out.overLongRefused++;
      else note(out.anomalies, `a name of ${exact} bytes: ${JSON.stringify(reply).slice(0, 200)}`);
    }
    if (Date.now() >= nextFill && Date.now() + 2_000 < end) {
      nextFill = Date.now() + FILL_EVERY_MS;
      out.fills++;
      if (await fillOne(port, out.fills, bound, perConnection, fill, out.anomalies)) {
        out.fillsExact++;
      }
    }
    await sleep(NAMES_EVERY_MS);
  }
  await conn.close();
  return out;
}

/** A fresh connection: `fill` names of `bound` bytes accepted, one more refused -32005. */
async function fillOne(port, round, bound, perConnection, fill, anomalies) {
  const conn = await rpcSocket(port, ADDRESSES.names);
  try {
    const names = Array.from({ length: fill }, (_, k) =>
      topicName(`f${round}.${k}`, bound, UNITS[k % UNITS.length]),
    );
    const replies = await Promise.all(names.map((name) => conn.request('subscribe', [name])));
    const accepted = replies.filter(isSubscriptionId).length;
    const over = await conn.request('subscribe', [topicName(`f${round}.over`, bound, 'x')]);
    const refused = errorIs(over, -32005, { limit: perConnection, bytes: (fill + 1) * bound });
    if (accepted === fill && refused) return true;
    note(
      anomalies,
      `fill ${round}: ${accepted} of ${fill} accepted, then ${JSON.stringify(over).slice(0, 200)}`,
    );
    return false;
  } finally {
    await conn.close();
  }
}

/** Open `count` half-sent upgrades, `concurrency` at a time; resolves once each has connected. */
async function openHalfSent(port, count, concurrency) {
  const sockets = [];
  let started = 0;
  const worker = async () => {
    while (started < count) {
      started++;
      const raw = rawSocket(port, ADDRESSES.halfSent, HALF_UPGRADE);
      sockets.push(raw);
      await raw.connected;
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return sockets;
}

async function halfSentUpgrades(port, end, limits) {
  const perAddress = limits.maxHttpSocketsPerIp;
  const T = HEADERS_TIMEOUT_MS;
  const out = {
    cycles: 0,
    held: 0,
    heldCut: 0,
    heldAnswered408: 0,
    /** Null until a held socket was cut (JSON has no Infinity). */
    cutMinMs: null,
    cutMaxMs: 0,
    over: 0,
    overRefused: 0,
    refusedWorstMs: 0,
    anomalies: [],
  };
  const maxCycles = Math.ceil((end - Date.now()) / T) + 1;
  for (let c = 0; c < maxCycles && Date.now() + T + 1_000 < end; c++) {
    out.cycles++;
    const held = await openHalfSent(port, perAddress, 50);
    const over = await openHalfSent(port, HALF_SENT_OVER, HALF_SENT_OVER);
    const all = [...held, ...over];
    const done = await within(
      Promise.all(all.map((raw) => raw.closed)),
      T + CUT_LATE_SLACK_MS + 5_000,
      'timed out',
    );
    if (done === 'timed out') {
      const open = all.filter((raw) => raw.record.closedAt === undefined).length;
      note(out.anomalies, `cycle ${c + 1}: ${open} socket(s) still open long after the timeout`);
      for (const raw of all) raw.socket.destroy();
      await within(Promise.all(all.map((raw) => raw.closed)), 5_000, undefined);
    }
    for (const raw of held) {
      out.held++;
      const { startedAt, connectedAt, closedAt, received } = raw.record;
      const sinceStart = closedAt === undefined ? -1 : closedAt - startedAt;
      const sinceConnect =
        connectedAt === undefined || closedAt === undefined ? Infinity : closedAt - connectedAt;
      // Closed (by the gateway's cut, or Node's own 408 for the same timeout), not too late;
      // how early is judged by soak.mjs against the gateway's event-loop delays (cutMinMs).
      const answered408 = received.startsWith('HTTP/1.1 408');
      if (
        sinceStart >= 0 &&
        sinceConnect <= T + CUT_LATE_SLACK_MS &&
        (received === '' || answered408)
      ) {
        out.heldCut++;
        out.cutMinMs = Math.min(out.cutMinMs ?? Infinity, sinceStart);
        out.cutMaxMs = Math.max(out.cutMaxMs, sinceConnect);
        if (answered408) out.heldAnswered408++;
      } else {
        note(
          out.anomalies,
          `a held socket closed ${sinceStart.toFixed(0)} ms after its connect began, ` +
            `${sinceConnect.toFixed(0)} ms after it connected (${received.length} B)`,
        );
      }
    }
    for (const raw of over) {
      out.over++;
      const { startedAt, connectedAt, closedAt, received } = raw.record;
      // Counted from the start of the connect, so this process's own delays can only make it
      // look slower; soak.mjs judges how fast against the gateway's event-loop delays, and
      // that these were the sockets it refused by the bound against its ip-limit count.
      const ms = closedAt === undefined ? Infinity : closedAt - startedAt;
      if (received === '' && closedAt !== undefined) {
        out.overRefused++;
        out.refusedWorstMs = Math.max(out.refusedWorstMs, ms);
      } else {
        note(
          out.anomalies,
          `an over-bound socket closed ${ms.toFixed(0)} ms after its connect began ` +
            `(connected after ${((connectedAt ?? NaN) - startedAt).toFixed(0)} ms, ${received.length} B)`,
        );
      }
    }
    // The gateway releases a slot on its socket's 'close': give it a moment before the next cycle.
    await sleep(200);
  }
  return out;
}

function postText(body, whole) {
  const head =
    'POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
  return head + (whole ? body : body.slice(0, Math.floor(body.length / 2)));
}

async function abortedPosts(port, end) {
  const out = { sent: 0, whole: 0, halfBody: 0, closed: 0, answered: 0 };
  const inFlight = new Set();
  const maxIterations = Math.ceil((end - Date.now()) / POSTS_EVERY_MS) + 1;
  for (let i = 0; i < maxIterations && Date.now() < end; i++) {
    while (inFlight.size >= POSTS_IN_FLIGHT) await Promise.race(inFlight);
    const whole = i % 2 === 0;
    out.sent++;
    if (whole) out.whole++;
    else out.halfBody++;
    const body = JSON.stringify({ jsonrpc: '2.0', method: 'echo', params: [i], id: i });
    const raw = rawSocket(port, ADDRESSES.posts, postText(body, whole), {
      destroyAfterWrite: true,
    });
    const settled = within(raw.closed, WAIT_MS, undefined).then((record) => {
      inFlight.delete(settled);
      if (!record) {
        raw.socket.destroy();
        return;
      }
      out.closed++;
      if (record.received !== '') out.answered++;
    });
    inFlight.add(settled);
    await sleep(POSTS_EVERY_MS);
  }
  await Promise.all(inFlight);
  return out;
}

/** One connection that subscribes with `since: 0`, never reads, and is cut after the hold. */
async function unreadReplay(port) {
  const socket = new WebSocket(`ws://${HOST}:${port}/rpc`, {
    localAddress: ADDRESSES.replays,
    perMessageDeflate: false,
  });
  socket.on('error', () => undefined);
  const closed = new Promise((resolve) => socket.once('close', resolve));
  const opened = await within(
    new Promise((resolve) => {
      socket.once('open', () => resolve(true));
      void closed.then(() => resolve(false));
    }),
    WAIT_MS,
    false,
  );
  if (opened) {
    socket.send(
      JSON.stringify({
        jsonrpc: '2.0',
        method: 'subscribe',
        params: { topic: ARCHIVE.topic, since: 0 },
        id: 1,
      }),
    );
    // Not a byte read from here on: the reply, the replay and the pings stay unread.
    socket.pause();
    await sleep(REPLAY_HOLD_MS);
  }
  socket.terminate();
  await within(closed, WAIT_MS, undefined);
  return opened;
}

async function unreadReplays(port, end) {
  const out = { replays: 0, opened: 0 };
  const running = [];
  const maxIterations = Math.ceil((end - Date.now()) / REPLAYS_EVERY_MS) + 1;
  for (let i = 0; i < maxIterations && Date.now() + REPLAY_HOLD_MS < end; i++) {
    out.replays++;
    running.push(unreadReplay(port).then((opened) => opened && out.opened++));
    await sleep(REPLAYS_EVERY_MS);
  }
  await Promise.all(running);
  return out;
}

/** Run every attack against `port` for `ms`; resolves with their counts once all have ended. */
async function attack(port, ms, limits) {
  const end = Date.now() + ms;
  const started = Date.now();
  const [names, halfSent, posts, replays] = await Promise.all([
    topicNames(port, end, limits),
    halfSentUpgrades(port, end, limits),
    abortedPosts(port, end),
    unreadReplays(port, end),
  ]);
  return { names, halfSent, posts, replays, ms: Date.now() - started };
}

// ---------------------------------------------------------------------------
// The /livez prober
// ---------------------------------------------------------------------------

/** GET `path` on a new connection from `localAddress`: { status } or { error }, and the time. */
function get(port, path, localAddress) {
  return new Promise((resolve) => {
    const started = performance.now();
    let connectMs;
    const finish = (outcome) =>
      resolve({ ...outcome, ms: performance.now() - started, connectMs: connectMs ?? NaN });
    const req = httpRequest({ host: HOST, port, path, localAddress, agent: false }, (res) => {
      res.resume();
      res.once('end', () => finish({ status: res.statusCode }));
      res.once('error', (err) => finish({ error: err.code ?? err.message }));
    });
    const timer = setTimeout(() => req.destroy(new Error('timeout')), LIVEZ_TIMEOUT_MS);
    req.once('close', () => clearTimeout(timer));
    req.once('error', (err) => finish({ error: err.code ?? err.message }));
    req.once('socket', (socket) =>
      socket.once('connect', () => (connectMs = performance.now() - started)),
    );
    req.end();
  });
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function prober() {
  let phase = 'start';
  let stopping = false;
  let loop;
  const samples = [];
  const run = async (port) => {
    // Bounded by the watchdog of soak.mjs (which ends this process), and by `stop`.
    while (!stopping) {
      const next = performance.now() + LIVEZ_INTERVAL_MS;
      const at = phase;
      const outcome = await get(port, '/livez', ADDRESSES.probe);
      samples.push({ phase: at, ...outcome });
      const wait = next - performance.now();
      if (wait > 0 && !stopping) await sleep(wait);
    }
  };
  return {
    start(port) {
      loop ??= run(port);
    },
    phase(name) {
      phase = name;
    },
    async stop() {
      stopping = true;
      await loop;
      const ok = samples.filter((s) => s.status === 200);
      const failures = {};
      for (const s of samples) {
        if (s.status === 200) continue;
        const kind = s.error ?? `status ${s.status}`;
        failures[kind] = (failures[kind] ?? 0) + 1;
      }
      const sorted = samples.map((s) => s.ms).sort((a, b) => a - b);
      const byPhase = {};
      for (const s of samples) {
        const entry = (byPhase[s.phase] ??= { polls: 0, ok: 0, worstMs: 0 });
        entry.polls++;
        if (s.status === 200) entry.ok++;
        entry.worstMs = Math.max(entry.worstMs, s.ms);
      }
      const worst = samples.reduce((w, s) => (w === undefined || s.ms > w.ms ? s : w), undefined);
      return {
        polls: samples.length,
        ok: ok.length,
        failures,
        worstMs: worst?.ms ?? 0,
        worstConnectMs: worst?.connectMs ?? 0,
        worstPhase: worst?.phase,
        p50Ms: percentile(sorted, 50),
        p99Ms: percentile(sorted, 99),
        byPhase,
      };
    },
  };
}

// ---------------------------------------------------------------------------
// The child processes (forked by soak.mjs)
// ---------------------------------------------------------------------------

/** Serve soak.mjs's requests over IPC with `handlers` (name -> async (msg) => body). */
function serve(handlers) {
  // Never outlive the parent: no IPC channel, no reason to run.
  process.once('disconnect', () => process.exit(0));
  process.on('message', (msg) => {
    const handler = handlers[msg?.cmd];
    const reply = (body) => process.send({ id: msg.id, ...body });
    if (!handler) return reply({ error: `unknown command ${msg?.cmd}` });
    Promise.resolve()
      .then(() => handler(msg))
      .then(
        (body) => reply(body ?? { ok: true }),
        (err) => reply({ error: String(err?.stack ?? err) }),
      );
    return undefined;
  });
  process.send({ type: 'ready' });
}

async function main(role) {
  if (role === '--attack') {
    const dist = new URL('../dist/src/index.js', import.meta.url);
    const { defaultLimits } = await import(dist.href);
    serve({ attack: async (msg) => ({ report: await attack(msg.port, msg.ms, defaultLimits) }) });
  } else if (role === '--probe') {
    const probe = prober();
    serve({
      start: (msg) => probe.start(msg.port),
      phase: (msg) => probe.phase(msg.name),
      stop: async () => ({ report: await probe.stop() }),
    });
  } else {
    throw new Error(`soak-attacks.mjs is forked by soak.mjs with --attack or --probe, not ${role}`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main(process.argv[2]);
