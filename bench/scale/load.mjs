// A scale-run load process: holds its share of the connections as bare `ws` client sockets
// (no permessage-deflate, no JSON-RPC library), each from one of the loopback source
// addresses it is given, subscribes them in waves, and counts what arrives. A published
// message carries `t`, the publish time on the machine's monotonic clock (bench/ipc.mjs
// nowMs), so each delivery's latency is its arrival time minus `t`, in every process alike.
import WebSocket from 'ws';
import { nowMs, serve } from '../ipc.mjs';
import { Histogram } from './histogram.mjs';

/** The open connections: { ws, subs (subscription ids held), nextId }. */
const conns = [];
/** Connections that closed without being asked to (must stay 0). */
let droppedAfterOpen = 0;
let closing = false;

/** What arrived since the last `reset`. */
let phase = newPhase();
function newPhase() {
  return { received: 0, firstAt: 0, lastAt: 0, hist: new Histogram(), waiter: undefined };
}

/** Replies awaited by the current wave, and what they said. */
let wave = { outstanding: 0, refused: 0, sample: undefined, done: undefined };

const SUBSCRIPTION = '"method":"subscription"';

function onMessage(conn, data) {
  const text = data.toString();
  if (text.includes(SUBSCRIPTION)) {
    const at = nowMs();
    const i = text.indexOf('"t":');
    const t = i < 0 ? NaN : parseFloat(text.slice(i + 4, text.indexOf(',', i)));
    const p = phase;
    if (p.received === 0) p.firstAt = at;
    p.received++;
    p.lastAt = at;
    if (Number.isFinite(t)) p.hist.add(at - t);
    if (p.waiter && p.received >= p.waiter.count) p.waiter.resolve();
    return;
  }
  const reply = JSON.parse(text);
  if ('error' in reply) {
    wave.refused++;
    wave.sample ??= JSON.stringify(reply.error);
  } else if (typeof reply.result === 'string') conn.subs.push(reply.result);
  if (--wave.outstanding === 0) wave.done?.();
}

/** Open `count` connections, at most `concurrency` handshakes at a time; connection i from addresses[i mod length]. */
function open({ url, count, addresses, concurrency }) {
  const startedAt = nowMs();
  let opened = 0;
  let failed = 0;
  let sample;
  let next = 0;
  let inFlight = 0;
  return new Promise((resolve) => {
    const settle = () => {
      inFlight--;
      if (next < count) launch();
      else if (inFlight === 0)
        resolve({ opened, failed, sample, startedAt, lastAt: nowMs(), addresses });
    };
    const launch = () => {
      while (inFlight < concurrency && next < count) {
        const i = next++;
        inFlight++;
        const ws = new WebSocket(url, {
          perMessageDeflate: false,
          localAddress: addresses[i % addresses.length],
        });
        const conn = { ws, subs: [], nextId: 0 };
        let settled = false;
        ws.once('open', () => {
          settled = true;
          opened++;
          conns.push(conn);
          settle();
        });
        ws.on('error', (err) => {
          if (settled) return;
          settled = true;
          failed++;
          sample ??= err.message;
          settle();
        });
        ws.on('close', () => {
          if (settled && !closing) droppedAfterOpen++;
        });
        ws.on('message', (data) => onMessage(conn, data));
      }
    };
    if (count === 0) resolve({ opened, failed, sample, startedAt, lastAt: nowMs(), addresses });
    else launch();
  });
}

/** Send `frames` (per connection) in waves of about `waveSize` requests, each wave once the last is answered. */
async function inWaves(framesOf, waveSize) {
  let refused = 0;
  let sample;
  let sent = 0;
  let i = 0;
  while (i < conns.length) {
    wave = { outstanding: 0, refused: 0, sample: undefined, done: undefined };
    const answered = new Promise((resolve) => (wave.done = resolve));
    let n = 0;
    for (; i < conns.length && n < waveSize; i++) {
      const conn = conns[i];
      for (const [method, param] of framesOf(conn, i)) {
        const id = ++conn.nextId;
        wave.outstanding++;
        n++;
        conn.ws.send(
          `{"jsonrpc":"2.0","method":"${method}","params":[${JSON.stringify(param)}],"id":${id}}`,
        );
      }
    }
    sent += n;
    if (n > 0) await answered;
    refused += wave.refused;
    sample ??= wave.sample;
  }
  return { sent, refused, sample };
}

serve({
  open,
  /**
   * Subscribe every connection: to `topic`, or, with `topics`, subscription j of
   * 0..topics×perTopic-1 goes to topic `prefix` floor(j / perTopic) on the connection whose
   * global index (offset + local index) is j mod total: each topic gets perTopic
   * subscribers on distinct connections.
   */
  subscribe({ topic, prefix, topics, perTopic, offset, total, waveSize }) {
    const subscriptions = topics * perTopic;
    const framesOf = topic
      ? () => [['subscribe', topic]]
      : (_conn, i) => {
          const frames = [];
          for (let j = offset + i; j < subscriptions; j += total)
            frames.push(['subscribe', prefix + Math.floor(j / perTopic)]);
          return frames;
        };
    return inWaves(framesOf, waveSize);
  },
  async unsubscribeAll({ waveSize }) {
    const result = await inWaves(
      (conn) => conn.subs.splice(0).map((id) => ['unsubscribe', id]),
      waveSize,
    );
    return result;
  },
  reset() {
    phase = newPhase();
    return { droppedAfterOpen };
  },
  /** Resolves once `count` messages have arrived since the reset, or after `timeoutMs` with what has. */
  async waitFor({ count, timeoutMs }) {
    const p = phase;
    if (p.received < count) {
      let timer;
      await new Promise((resolve) => {
        p.waiter = { count, resolve };
        timer = setTimeout(resolve, timeoutMs);
      });
      clearTimeout(timer);
      p.waiter = undefined;
    }
    return {
      received: p.received,
      firstAt: p.firstAt,
      lastAt: p.lastAt,
      hist: p.hist.toJSON(),
      droppedAfterOpen,
    };
  },
  cpu() {
    const { user, system } = process.cpuUsage();
    return { us: user + system, t: nowMs(), rss: process.memoryUsage.rss() };
  },
  closeAll() {
    closing = true;
    for (const { ws } of conns) ws.terminate();
    conns.length = 0;
    return null;
  },
});
