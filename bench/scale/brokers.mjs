// Broker throughput on this machine: `node bench/scale/brokers.mjs [--seconds S]
// [--subscribers 1,4] [--size BYTES]`. For Redis pub/sub and NATS core publish/subscribe: one
// publisher (this process, keeping a window of publishes in flight: a pipeline on Redis,
// a flush every window on NATS) and N subscriber connections in a child process, for S
// seconds each; messages of BYTES bytes (default: the size of a gateway fan-out frame of the
// scale run's message). Prints messages published and delivered per second, and the broker
// server's own CPU per published message (from /proc). Every wait is bounded.
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { nowMs, sleep } from '../ipc.mjs';
import { ScaleChild } from './child.mjs';
import { NATS_URL, REDIS_URL, cpuUsOf, pidOf } from './local-brokers.mjs';

const here = (path) => fileURLToPath(new URL(path, import.meta.url));
/** Publishes in flight at once. */
const WINDOW = 1_000;

// The frame a subscriber of the scale run gets, as the payload's model.
const SAMPLE_FRAME =
  '{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"0x1","seq":123456,' +
  '"result":{"k":123456,"t":1234567.891,"price":97000.25,"symbol":"BTC-USD"}}}';

const { values: opts } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    subscribers: { type: 'string', default: '1,4' },
    size: { type: 'string', default: String(SAMPLE_FRAME.length) },
    help: { type: 'boolean', default: false },
  },
});
if (opts.help) {
  console.log(
    'node bench/scale/brokers.mjs [--seconds S (1-60)] [--subscribers 1,4] [--size BYTES]',
  );
  process.exit(0);
}
const seconds = Math.min(60, Math.max(1, Number(opts.seconds)));
const size = Math.min(1 << 20, Math.max(1, Number(opts.size)));
const subscriberCounts = opts.subscribers
  .split(',')
  .map(Number)
  .filter((n) => n >= 1 && n <= 64);
const payload = Buffer.from(SAMPLE_FRAME.padEnd(size, ' ').slice(0, size));

async function redisPublisher() {
  const { Redis } = await import('ioredis');
  const client = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await client.connect();
  const pid = Number(/process_id:(\d+)/.exec(await client.info('server'))?.[1]) || undefined;
  return {
    pid,
    /** `n` publishes in one pipeline. */
    publish: (channel, n) => {
      const pipeline = client.pipeline();
      for (let i = 0; i < n; i++) pipeline.publish(channel, payload);
      return pipeline.exec();
    },
    close: () => client.quit(),
  };
}

async function natsPublisher() {
  const { connect } = await import('@nats-io/transport-node');
  const nc = await connect({ servers: NATS_URL });
  return {
    pid: pidOf('nats-server'),
    /** `n` publishes, then a flush (the server has them all). */
    publish: (channel, n) => {
      for (let i = 0; i < n; i++) nc.publish(channel, payload);
      return nc.flush();
    },
    close: () => nc.close(),
  };
}

async function measure(broker, subscribers) {
  const child = new ScaleChild(`${broker} subscribers`, here('./broker-subscribers.mjs'));
  let publisher;
  try {
    const url = broker === 'redis' ? REDIS_URL : NATS_URL;
    const { channel } = await child.request('start', { broker, count: subscribers, url });
    publisher = broker === 'redis' ? await redisPublisher() : await natsPublisher();
    const before = await child.request('count');
    const cpu0 = cpuUsOf(publisher.pid);
    const t0 = nowMs();
    let published = 0;
    while (nowMs() - t0 < seconds * 1000) {
      await publisher.publish(channel, WINDOW);
      published += WINDOW;
    }
    const publishMs = nowMs() - t0;
    // Let the last copies arrive (bounded), then count.
    let delivered = 0;
    for (let i = 0; i < 100; i++) {
      delivered = (await child.request('count')) - before;
      if (delivered >= published * subscribers) break;
      await sleep(50);
    }
    const deliverMs = nowMs() - t0;
    const cpu1 = cpuUsOf(publisher.pid);
    return {
      broker,
      subscribers,
      published,
      publishedPerSecond: published / (publishMs / 1000),
      delivered,
      deliveredPerSecond: delivered / (deliverMs / 1000),
      lost: published * subscribers - delivered,
      serverCpuPerMessageUs:
        cpu0 !== undefined && cpu1 !== undefined ? (cpu1 - cpu0) / published : undefined,
    };
  } finally {
    await publisher?.close().catch(() => undefined);
    await child.request('stop', {}, 10_000).catch(() => undefined);
    await child.stop();
  }
}

const watchdog = setTimeout(
  () => {
    console.error('brokers: watchdog: stopping');
    process.exit(2);
  },
  (seconds + 30) * 2 * subscriberCounts.length * 1000,
);
watchdog.unref();

const rows = [];
for (const broker of ['redis', 'nats']) {
  for (const subscribers of subscriberCounts) {
    try {
      const r = await measure(broker, subscribers);
      rows.push(r);
      console.error(
        `${broker}, ${subscribers} subscriber(s): ${Math.round(r.publishedPerSecond)} published/s, ${Math.round(r.deliveredPerSecond)} delivered/s`,
      );
    } catch (err) {
      console.error(`${broker}, ${subscribers} subscriber(s): ${err.message}`);
      rows.push({ broker, subscribers, error: err.message });
    }
  }
}
clearTimeout(watchdog);

const int = (n) => (typeof n === 'number' ? Math.round(n).toLocaleString('en-US') : '—');
const fix = (n) => (typeof n === 'number' ? n.toFixed(2) : '—');
const lines = [
  '',
  `Command: \`node bench/scale/brokers.mjs${process.argv.length > 2 ? ` ${process.argv.slice(2).join(' ')}` : ''}\` (${new Date().toISOString().slice(0, 10)}); ${size}-byte messages, ${seconds} s each, ${WINDOW} publishes in flight.`,
  '',
  '| broker | subscribers | published/s | delivered/s (all subscribers) | lost | broker CPU per published message (µs) |',
  '| --- | ---: | ---: | ---: | ---: | ---: |',
  ...rows.map((r) =>
    r.error
      ? `| ${r.broker} | ${r.subscribers} | failed: ${r.error} | | | |`
      : `| ${r.broker === 'redis' ? 'Redis pub/sub' : 'NATS core'} | ${r.subscribers} | ${int(r.publishedPerSecond)} | ${int(r.deliveredPerSecond)} | ${int(r.lost)} | ${fix(r.serverCpuPerMessageUs)} |`,
  ),
  '',
];
process.stdout.write(lines.join('\n'));
process.exitCode = rows.some((r) => r.error) ? 1 : 0;
