// The measured steps of the scale run against one server process (or a ServerGroup of several,
// bench/scale/server-group.mjs), in order: the connect storm, memory with every connection open,
// one topic with every connection subscribed (paced messages, then a burst), and many topics with
// a few subscribers each. Each step returns plain figures; the runner prints them side by side.
import { nowMs, sleep } from '../ipc.mjs';
import { Histogram } from './histogram.mjs';

const sum = (xs) => xs.reduce((a, b) => a + b, 0);
const max = (xs) => Math.max(...xs);

/** What each load process reports back from `waitFor`, merged. */
async function waitAll(loads, counts, timeoutMs) {
  const parts = await Promise.all(
    loads.map((load, p) =>
      load.request('waitFor', { count: counts[p], timeoutMs }, timeoutMs + 10_000),
    ),
  );
  return {
    received: sum(parts.map((r) => r.received)),
    lastAt: max(parts.map((r) => r.lastAt)),
    hist: parts.map((r) => r.hist),
    dropped: sum(parts.map((r) => r.droppedAfterOpen)),
  };
}

const resetAll = (loads) => Promise.all(loads.map((load) => load.request('reset')));
const cpuOf = async (server) => (await server.request('cpu')).us;
const memoryOf = (server) => server.request('memory', {}, 120_000);

export class Phases {
  /**
   * `server`, `loads`: ScaleChild handles; `shares[p]`: how many connections load p opens;
   * `addresses[p]`: its source addresses; `log`: progress lines.
   */
  constructor({ server, loads, shares, addresses, settings, log }) {
    Object.assign(this, { server, loads, shares, addresses, settings, log });
    /** Connections each load process has open (after the storm). */
    this.opened = shares.map(() => 0);
    this.problems = [];
    this.k = 1;
  }

  get total() {
    return sum(this.opened);
  }

  problem(text) {
    this.problems.push(text);
    this.log(`  !! ${text}`);
  }

  async baseline() {
    return memoryOf(this.server);
  }

  /** Load process p opens its share on `urls[p mod urls.length]` (one URL per node). */
  async storm(urls) {
    const { loads, shares, addresses, settings } = this;
    const cpu0 = await cpuOf(this.server);
    const t0 = nowMs();
    const results = await Promise.all(
      loads.map((load, p) =>
        load.request(
          'open',
          {
            url: urls[p % urls.length],
            count: shares[p],
            addresses: addresses[p],
            concurrency: settings.concurrency,
          },
          settings.stepTimeoutMs,
        ),
      ),
    );
    const openMs = max(results.map((r) => r.lastAt)) - t0;
    const cpu1 = await cpuOf(this.server);
    this.opened = results.map((r) => r.opened);
    const failed = sum(results.map((r) => r.failed));
    if (failed > 0)
      this.problem(`connect storm: ${failed} failed (${results.find((r) => r.sample)?.sample})`);
    return { opened: this.total, failed, openMs, cpuPerConnUs: (cpu1 - cpu0) / this.total };
  }

  /**
   * Every connection open and idle for `ms` (longer than the gateway's 30 s heartbeat
   * interval, so a whole round of pings is in it): the longest event-loop delay and the
   * server's CPU per second.
   */
  async idle(ms) {
    const { server } = this;
    const cpu0 = await cpuOf(server);
    await server.request('loopStart');
    await sleep(ms);
    const loop = await server.request('loopRead');
    const cpu1 = await cpuOf(server);
    return { ...loop, cpuMsPerSecond: (cpu1 - cpu0) / 1000 / (ms / 1000) };
  }

  /** The empty server's CPU per second over `ms` (its own timers: metrics, heartbeat ticks). */
  async emptyIdle(ms) {
    const cpu0 = await cpuOf(this.server);
    await sleep(ms);
    const cpu1 = await cpuOf(this.server);
    return { cpuMsPerSecond: (cpu1 - cpu0) / 1000 / (ms / 1000) };
  }

  async subscribe(args) {
    const { loads, settings } = this;
    const cpu0 = await cpuOf(this.server);
    const t0 = nowMs();
    const results = await Promise.all(
      loads.map((load, p) =>
        load.request(
          'subscribe',
          { ...args, offset: this.offsetOf(p), total: this.total, waveSize: settings.waveSize },
          settings.stepTimeoutMs,
        ),
      ),
    );
    const ms = nowMs() - t0;
    const cpu1 = await cpuOf(this.server);
    const refused = sum(results.map((r) => r.refused));
    if (refused > 0)
      this.problem(`subscribe: ${refused} refused (${results.find((r) => r.sample)?.sample})`);
    const accepted = results.map((r) => r.sent - r.refused);
    return {
      accepted,
      subscriptions: sum(accepted),
      ms,
      cpuPerSubscribeUs: (cpu1 - cpu0) / sum(results.map((r) => r.sent)),
    };
  }

  offsetOf(p) {
    return sum(this.opened.slice(0, p));
  }

  async unsubscribe() {
    const results = await Promise.all(
      this.loads.map((load) =>
        load.request(
          'unsubscribeAll',
          { waveSize: this.settings.waveSize },
          this.settings.stepTimeoutMs,
        ),
      ),
    );
    const refused = sum(results.map((r) => r.refused));
    if (refused > 0) this.problem(`unsubscribe: ${refused} refused`);
  }

  /** `messages` paced messages to every connection, each published once the previous one has reached all. */
  async paced(messages) {
    const { server, loads, settings } = this;
    const toLast = [];
    const hists = [];
    let deliveries = 0;
    const cpu0 = await cpuOf(server);
    for (let m = 0; m < messages; m++) {
      await resetAll(loads);
      const { t } = await server.request('publishOne', { topic: 'all', k: this.k++ });
      const got = await waitAll(loads, this.opened, settings.stepTimeoutMs);
      if (got.received < this.total)
        this.problem(`paced message ${m + 1}: ${got.received} of ${this.total} delivered`);
      if (got.dropped > 0) this.problem(`${got.dropped} connections dropped`);
      deliveries += got.received;
      toLast.push(got.lastAt - t);
      hists.push(...got.hist);
      await sleep(settings.gapMs);
    }
    const cpu1 = await cpuOf(server);
    const hist = Histogram.merge(hists);
    toLast.sort((a, b) => a - b);
    return {
      toLastMedianMs: toLast[toLast.length >> 1],
      toLastMaxMs: toLast[toLast.length - 1],
      p50Ms: hist.percentile(50),
      p99Ms: hist.percentile(99),
      // The gaps between messages are in this window too: idle work (timers) is counted.
      cpuPerDeliveryUs: (cpu1 - cpu0) / deliveries,
    };
  }

  /** `n` messages to every connection, one per turn, back to back. */
  async burst(n) {
    const { server, loads, settings } = this;
    await resetAll(loads);
    const cpu0 = await cpuOf(server);
    const { startedAt } = await server.request('publishBurst', { topic: 'all', k: this.k, n });
    this.k += n;
    const got = await waitAll(
      loads,
      this.opened.map((c) => c * n),
      settings.stepTimeoutMs,
    );
    const cpu1 = await cpuOf(server);
    if (got.received < n * this.total)
      this.problem(`burst: ${got.received} of ${n * this.total} delivered`);
    const spanMs = got.lastAt - startedAt;
    return {
      cpuPerDeliveryUs: (cpu1 - cpu0) / got.received,
      spanMs,
      deliveriesPerSecond: got.received / (spanMs / 1000),
    };
  }

  /**
   * One message to each of `topics` topics ("t.0" ...) before they have subscribers, 50 awaited
   * at a time: the broker makes what a topic needs (a NATS stream, a Redis counter) here rather
   * than in the measured passes, where 10,000 first publishes at once would ask NATS for 10,000
   * streams together, more than it makes within the broker's timeout.
   */
  async prepareTopics({ topics }) {
    const { ms, failed } = await this.server.request(
      'prepareTopics',
      { prefix: 't.', count: topics, k: this.k, concurrency: 50 },
      this.settings.stepTimeoutMs,
    );
    this.k += topics;
    if (failed > 0) this.problem(`preparing topics: ${failed} of ${topics} first publishes failed`);
    return { ms, failed };
  }

  /** One message to each of `topics` topics ("t.0" ...), `passes` times; per-topic counts from `accepted`. */
  async topicPasses({ topics, passes, accepted }) {
    const { server, loads, settings } = this;
    const cpu = [];
    const spans = [];
    for (let pass = 0; pass < passes; pass++) {
      await resetAll(loads);
      const cpu0 = await cpuOf(server);
      const { startedAt } = await server.request(
        'publishTopics',
        { prefix: 't.', count: topics, k: this.k, perTurn: settings.topicsPerTurn },
        settings.stepTimeoutMs,
      );
      this.k += topics;
      const got = await waitAll(loads, accepted, settings.stepTimeoutMs);
      const cpu1 = await cpuOf(server);
      if (got.received < sum(accepted))
        this.problem(`topic pass ${pass + 1}: ${got.received} of ${sum(accepted)} delivered`);
      cpu.push((cpu1 - cpu0) / topics);
      spans.push(got.lastAt - startedAt);
      await sleep(settings.gapMs);
    }
    const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
    return { cpuPerPublishUs: median(cpu), spanMs: median(spans) };
  }

  memory() {
    return memoryOf(this.server);
  }
}
