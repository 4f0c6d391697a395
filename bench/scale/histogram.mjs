// Latencies from several load processes, merged: each keeps counts in logarithmic buckets
// (0.5% wide, from 1 µs to over 100 s), which the runner adds up and reads percentiles from,
// instead of shipping millions of samples over IPC.
const RATIO = 1.005;
const LOG_RATIO = Math.log(RATIO);
const BUCKETS = Math.ceil(Math.log(1e9) / LOG_RATIO) + 1; // 1 µs .. 1000 s

export class Histogram {
  constructor() {
    this.counts = new Uint32Array(BUCKETS);
    this.n = 0;
  }

  /** One latency in milliseconds. */
  add(ms) {
    const us = ms * 1000;
    const i = us <= 1 ? 0 : Math.min(BUCKETS - 1, Math.ceil(Math.log(us) / LOG_RATIO));
    this.counts[i]++;
    this.n++;
  }

  /** The non-empty buckets, as [index, count] pairs (what crosses IPC). */
  toJSON() {
    const pairs = [];
    for (let i = 0; i < BUCKETS; i++) if (this.counts[i] > 0) pairs.push([i, this.counts[i]]);
    return pairs;
  }

  static merge(parts) {
    const h = new Histogram();
    for (const pairs of parts) {
      for (const [i, count] of pairs) {
        h.counts[i] += count;
        h.n += count;
      }
    }
    return h;
  }

  /** The p-th percentile (0..100) in milliseconds: the upper edge of its bucket. */
  percentile(p) {
    if (this.n === 0) return undefined;
    const rank = Math.max(1, Math.ceil((p / 100) * this.n));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i];
      if (seen >= rank) return RATIO ** i / 1000;
    }
    return undefined;
  }
}
