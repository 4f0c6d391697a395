// The load generator: a child process of the runner, driven over IPC. It opens the
// contestants' clients (bench/clients: raw ws, Socket.IO, HTTP to an upstream, this project's
// own), runs closed-loop request/response load, counts and checks
// fan-out messages, and holds idle connections. It never decides timing itself: the
// runner marks the start and end of each measured window. It reads its own CPU time across
// each window, so a client's cost per call and per received message can be compared.
import { nowMs, serve } from './ipc.mjs';
import * as http from './clients/http.mjs';
import * as jsonrpc from './clients/jsonrpc.mjs';
import * as socketio from './clients/socketio.mjs';
import * as wsrpc from './clients/wsrpc.mjs';
import { percentile } from './stats.mjs';

const clientKinds = { jsonrpc, 'socket.io': socketio, http, wsrpc };
const OPEN_CONCURRENCY = 50;
const MAX_LATENCIES = 1_000_000;
/** Send-to-reply times (ms) of the calls completed in the measured window; reused by every slice. */
const latencies = new Float64Array(MAX_LATENCIES);

/** This process's CPU time so far (user + system), µs. */
function cpuNowUs() {
  const { user, system } = process.cpuUsage();
  return user + system;
}

/**
 * Open `count` connections, at most OPEN_CONCURRENCY handshakes at a time; with
 * `sourceAddresses`, connection i comes from 127.0.0.(2 + i mod sourceAddresses).
 */
async function openMany({ url, client, count, sourceAddresses = 0 }) {
  const kind = clientKinds[client.kind];
  const conns = [];
  const from = (i) =>
    sourceAddresses > 0 ? { localAddress: `127.0.0.${2 + (i % sourceAddresses)}` } : {};
  for (let i = 0; i < count; i += OPEN_CONCURRENCY) {
    const batch = Math.min(OPEN_CONCURRENCY, count - i);
    const settled = await Promise.allSettled(
      Array.from({ length: batch }, (_, j) => kind.open(url, client, from(i + j))),
    );
    for (const s of settled) if (s.status === 'fulfilled') conns.push(s.value);
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed) {
      await closeAll(conns);
      throw new Error(`opened ${conns.length} of ${count} connections: ${failed.reason}`);
    }
  }
  return conns;
}

async function closeAll(conns, timeoutMs = 10_000) {
  let timer;
  const deadline = new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)));
  await Promise.race([Promise.all(conns.map((c) => c.close())), deadline]);
  clearTimeout(timer);
}

// ---- request/response: `conns` connections, each keeping `inflight` calls outstanding.
let rr;

function startRequests({ url, client, conns: count, inflight, maxMs }) {
  return openMany({ url, client, count }).then((conns) => {
    // Batch the sends of one turn per socket when pipelining, so the load generator
    // spends its CPU on frames, not on syscalls; a lone call is sent at once.
    const coalesce = inflight > 1;
    const state = {
      conns,
      running: true,
      completed: 0,
      wrong: 0,
      wrongSample: undefined,
      outstanding: 0,
      recording: false,
      recorded: 0,
      stopTimer: setTimeout(() => (state.running = false), maxMs),
    };
    for (const conn of conns) {
      const sentAt = new Map();
      let nextId = 0;
      const send = () => {
        const id = ++nextId;
        sentAt.set(id, performance.now());
        state.outstanding++;
        conn.call(id, id, 1, coalesce);
      };
      conn.onReply = (id, result, error) => {
        const t0 = sentAt.get(id);
        sentAt.delete(id);
        state.outstanding--;
        state.completed++;
        if (result !== id + 1 || error !== undefined) {
          state.wrong++;
          state.wrongSample ??= JSON.stringify(error ?? { result, expected: id + 1 });
        }
        if (state.recording && state.recorded < MAX_LATENCIES && t0 !== undefined)
          latencies[state.recorded++] = performance.now() - t0;
        if (state.running) send();
      };
      for (let i = 0; i < inflight; i++) send();
    }
    rr = state;
    return { opened: conns.length };
  });
}

/**
 * A mark: the time, the count of completed calls and this process's CPU time (cpuUs); the
 * first mark starts latency recording.
 */
function mark() {
  const t = nowMs();
  const cpuUs = cpuNowUs();
  const completed = rr.completed;
  if (!rr.recording && rr.recorded === 0) {
    rr.recording = true;
    return { t, cpuUs, completed, wrong: rr.wrong };
  }
  rr.recording = false;
  const count = rr.recorded;
  const p50 = percentile(latencies, count, 50);
  const p99 = percentile(latencies, count, 99);
  return { t, cpuUs, completed, wrong: rr.wrong, p50, p99, samples: count };
}

async function stopRequests() {
  const state = rr;
  state.running = false;
  clearTimeout(state.stopTimer);
  const deadline = performance.now() + 5_000;
  while (state.outstanding > 0 && performance.now() < deadline)
    await new Promise((r) => setTimeout(r, 5));
  await closeAll(state.conns);
  rr = undefined;
  return {
    completed: state.completed,
    unanswered: state.outstanding,
    wrong: state.wrong,
    wrongSample: state.wrongSample,
  };
}

// ---- fan-out: subscribers that count and order-check every message.
let subs;

async function openSubscribers({ url, client, count }) {
  const conns = await openMany({ url, client, count });
  await Promise.all(conns.map((c) => c.subscribe()));
  subs = { conns, trackers: conns.map((conn) => track(conn)), done: 0, onDone: undefined };
  return { subscribed: conns.length };
}

function track(conn) {
  const tracker = {
    first: 0,
    last: -1,
    expected: 0,
    received: 0,
    outOfOrder: 0,
    stray: 0,
    lastAt: 0,
    complete: false,
  };
  conn.onData = (k) => {
    if (k < tracker.first || k > tracker.last) {
      tracker.stray++;
      return;
    }
    tracker.received++;
    // A k above the expected one is a gap (counted as lost at the end); below it, a
    // message that arrived after a later one, or twice.
    if (k < tracker.expected) tracker.outOfOrder++;
    else tracker.expected = k + 1;
    // Per message (paced runs): when the last subscriber got it, read once per message.
    const arrivals = subs.arrivals;
    if (arrivals && ++arrivals.counts[k - tracker.first] === subs.trackers.length)
      arrivals.at[k - tracker.first] = nowMs();
    if (k === tracker.last && !tracker.complete) {
      tracker.complete = true;
      tracker.lastAt = nowMs();
      if (++subs.done === subs.trackers.length) {
        subs.cpuAtDone = cpuNowUs();
        subs.onDone?.();
      }
    }
  };
  return tracker;
}

/** Bytes the connections' TCP sockets have read (0 for clients that do not expose a `ws`). */
function bytesRead(conns) {
  let total = 0;
  for (const conn of conns) total += conn.ws?._socket?.bytesRead ?? 0;
  return total;
}

/**
 * Expect messages first..first+n-1 on every subscriber. Must be acknowledged before publishing.
 * With `perMessage`, also note when the last subscriber got each message (awaitDelivery's
 * `arrivals`).
 */
function arm({ first, n, perMessage = false }) {
  for (const t of subs.trackers) {
    Object.assign(t, {
      first,
      last: first + n - 1,
      expected: first,
      received: 0,
      outOfOrder: 0,
      stray: 0,
    });
    Object.assign(t, { lastAt: 0, complete: false });
  }
  subs.done = 0;
  subs.arrivals = perMessage
    ? { at: new Float64Array(n).fill(NaN), counts: new Int32Array(n) }
    : undefined;
  subs.bytesAtArm = bytesRead(subs.conns);
  subs.cpuAtDone = undefined;
  subs.cpuAtArm = cpuNowUs();
  return { armed: subs.trackers.length };
}

/**
 * Wait until every subscriber has the last message (or the timeout), then report; clientCpuUs:
 * this process's CPU time from `arm` until the last subscriber had the last message (or the end
 * of the wait).
 */
async function awaitDelivery({ n, timeoutMs }) {
  if (subs.done < subs.trackers.length) {
    let timer;
    await new Promise((resolve) => {
      subs.onDone = resolve;
      timer = setTimeout(resolve, timeoutMs);
    });
    clearTimeout(timer);
    subs.onDone = undefined;
  }
  const trackers = subs.trackers;
  let received = 0;
  let outOfOrder = 0;
  let stray = 0;
  let lastAt = 0;
  for (const t of trackers) {
    received += t.received;
    outOfOrder += t.outOfOrder;
    stray += t.stray;
    if (t.lastAt > lastAt) lastAt = t.lastAt;
  }
  const expected = n * trackers.length;
  return {
    expected,
    received,
    lost: expected - received,
    outOfOrder,
    stray,
    incomplete: trackers.length - subs.done,
    lastAt,
    bytesRead: bytesRead(subs.conns) - subs.bytesAtArm,
    clientCpuUs: (subs.cpuAtDone ?? cpuNowUs()) - subs.cpuAtArm,
    // NaN for a message some subscriber never got.
    ...(subs.arrivals && { arrivals: Array.from(subs.arrivals.at) }),
  };
}

async function closeSubscribers() {
  // Messages still being read (a slow contestant's backlog, inflated after the window ended)
  // belong to no window any more.
  for (const conn of subs.conns) conn.onData = () => {};
  await closeAll(subs.conns);
  subs = undefined;
  return {};
}

// ---- idle connections for the memory scenario.
let idle;

async function openIdle({ url, client, count }) {
  idle = await openMany({ url, client, count });
  return { opened: idle.length };
}

async function closeIdle() {
  await closeAll(idle, 20_000);
  idle = undefined;
  return {};
}

// ---- presence: connections that join a topic (subscribe) and leave it (unsubscribe) in waves.
let members;

async function openMembers({ url, client, count, sourceAddresses }) {
  members = { conns: await openMany({ url, client, count, sourceAddresses }), ids: [] };
  return { opened: members.conns.length };
}

/**
 * Every connection subscribes (`join`) or ends its subscription (`leave`), `wave` requests
 * sent in one turn, the next wave once the last has been answered. startedAt: the first send;
 * lastAt: the last answer.
 */
async function presenceWave({ action, wave }) {
  const { conns, ids } = members;
  let refused = 0;
  let refusedSample;
  const startedAt = nowMs();
  for (let i = 0; i < conns.length; i += wave) {
    const slice = conns.slice(i, i + wave);
    const settled = await Promise.allSettled(
      slice.map((conn, j) => (action === 'join' ? conn.subscribe() : conn.unsubscribe(ids[i + j]))),
    );
    settled.forEach((s, j) => {
      const ok = s.status === 'fulfilled' && (action === 'join' || s.value === true);
      if (ok && action === 'join') ids[i + j] = s.value;
      if (ok) return;
      refused++;
      refusedSample ??= s.status === 'rejected' ? String(s.reason) : JSON.stringify(s.value);
    });
  }
  return { startedAt, lastAt: nowMs(), refused, refusedSample };
}

async function closeMembers() {
  await closeAll(members?.conns ?? [], 30_000);
  members = undefined;
  return {};
}

serve({
  startRequests,
  mark,
  stopRequests,
  openSubscribers,
  arm,
  awaitDelivery,
  closeSubscribers,
  openIdle,
  closeIdle,
  openMembers,
  presenceWave,
  closeMembers,
});
