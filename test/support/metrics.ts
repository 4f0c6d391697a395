/** GET /metrics as text. */
export async function scrape(httpUrl: string): Promise<string> {
  const response = await fetch(`${httpUrl}/metrics`);
  if (response.status !== 200) throw new Error(`/metrics answered ${response.status}`);
  return response.text();
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Every sample line of a Prometheus text exposition. */
export function parseSamples(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[pair[1]!] = pair[2]!;
    }
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the one sample named `name` with exactly `labels`; undefined when absent. */
export function sampleValue(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const wanted = JSON.stringify(Object.entries(labels).sort());
  const found = parseSamples(text).filter(
    (s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === wanted,
  );
  if (found.length > 1) throw new Error(`${found.length} samples ${name} ${wanted}`);
  return found[0]?.value;
}

/**
 * Wait until the sample `name` with `labels` reads `value` (absent reads 0). Polled every 100 ms:
 * /metrics answers an address at most probeRequestsPerSecondPerIp (20) times a second.
 */
export async function untilSample(
  httpUrl: string,
  name: string,
  labels: Record<string, string>,
  value: number,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: number | undefined;
  for (;;) {
    last = sampleValue(await scrape(httpUrl), name, labels) ?? 0;
    if (last === value) return;
    if (Date.now() > deadline) {
      throw new Error(
        `timed out waiting for ${name} ${JSON.stringify(labels)} = ${value} (${last})`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
