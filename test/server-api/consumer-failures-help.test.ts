/**
 * The HELP of the server API consumer's counters names every value their label takes: an
 * operator reading /metrics learns what `reply_too_large` is from it as well as `read`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { consumerFigures } from '../../src/server-api/consumer-metrics.js';
import { parseSamples, scrape } from '../support/metrics.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** The values listed in parentheses at the end of `name`'s HELP line. */
function helpValues(text: string, name: string): string[] {
  const help = new RegExp(`^# HELP ${name} .*\\(([^)]*)\\)\\.$`, 'm').exec(text);
  return help ? help[1]!.split(', ') : [];
}

describe('the consumer metrics HELP', () => {
  it.each([
    ['wsrpc_server_api_consumer_failures_total', 'reason'],
    ['wsrpc_server_api_consumed_total', 'outcome'],
  ])('%s names every %s it is counted by', async (name, label) => {
    const { gateway, httpUrl } = await res.gateway({ limits: { metricsCacheMs: 0 } });
    consumerFigures(gateway.metrics.registry, 'nats');
    const text = await scrape(httpUrl);
    const values = parseSamples(text)
      .filter((sample) => sample.name === name)
      .map((sample) => sample.labels[label]!);
    expect(values.length).toBeGreaterThan(0);
    expect(helpValues(text, name).sort()).toEqual([...new Set(values)].sort());
  });
});
