// Small statistics helpers: medians across rounds, percentiles of latencies.

/** The values that are real numbers. */
function finite(values) {
  return values.filter((v) => typeof v === 'number' && Number.isFinite(v));
}

export function median(values) {
  const xs = finite(values).sort((a, b) => a - b);
  if (xs.length === 0) return undefined;
  const mid = xs.length >> 1;
  return xs.length % 2 ? xs[mid] : (xs[mid - 1] + xs[mid]) / 2;
}

/** Median, min and max of the finite values; undefined fields when there are none. */
export function summarize(values) {
  const xs = finite(values);
  if (xs.length === 0) return { median: undefined, min: undefined, max: undefined, n: 0 };
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), n: xs.length };
}

/** The p-th percentile (0..100, nearest rank) of the first `count` entries of a typed array. */
export function percentile(array, count, p) {
  if (count === 0) return undefined;
  const sorted = array.slice(0, count).sort();
  const rank = Math.min(count - 1, Math.max(0, Math.ceil((p / 100) * count) - 1));
  return sorted[rank];
}

/**
 * Per-round ratios of a contestant's figures to the baseline's figures of the
 * same round (rounds where either is missing are skipped), then summarized.
 */
export function ratioSummary(values, baselineValues) {
  const ratios = values.map((v, round) => {
    const base = baselineValues[round];
    return typeof v === 'number' && typeof base === 'number' && base !== 0 ? v / base : undefined;
  });
  return summarize(ratios);
}
