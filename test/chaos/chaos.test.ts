/**
 * The chaos suite in CI (issue 13): test/chaos/engine.ts on Redis and on NATS, one cycle of
 * faults each (node SIGKILL, broker SIGKILL and restart, a node's broker link cut for longer
 * than history, a node drained), asserting that no accepted message was silently lost,
 * duplicated or reordered for any subscriber, and that new clients reach each node that was
 * restarted or reconnected. Raw-protocol subscribers on the cut node (plain `ws`, no RpcClient)
 * must be told of what it lost by the server itself. Real processes and sockets on 127.0.0.1;
 * each wait has a deadline only to turn a hang into a failure. `npm run chaos` runs the same
 * engine for longer.
 */
import { dirname } from 'node:path';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildNodeScript } from '../support/cluster.js';
import { hasProgram } from '../support/server-processes.js';
import { inCi } from '../support/environment.js';
import type { BrokerKind } from '../support/brokers.js';
import { SCENARIOS, formatReport, runChaos } from './engine.js';

const programs: Record<BrokerKind, string> = { redis: 'redis-server', nats: 'nats-server' };
const missing = (kind: BrokerKind): boolean => !hasProgram(programs[kind]) && !inCi;

let script = '';
beforeAll(async () => {
  script = (await buildNodeScript()).script;
}, 120_000);
afterAll(() => {
  if (script) rmSync(dirname(script), { recursive: true, force: true });
});

describe.each(['redis', 'nats'] as const)('chaos on %s', (kind) => {
  it.skipIf(missing(kind))(
    missing(kind)
      ? `skipped: no ${programs[kind]} binary (CI=true makes this a failure)`
      : 'node kill, broker restart, partition longer than history, drain: no accepted message silently lost, duplicated or reordered; new clients reach restarted nodes',
    async () => {
      const result = await runChaos({ broker: kind, seconds: 0, script });
      console.log(formatReport(result));

      // Each fault happened, under traffic that reached the subscribers.
      for (const scenario of SCENARIOS) {
        const row = result.rows.find((r) => r.scenario === scenario)!;
        expect({ scenario, faults: row.faults > 0 || scenario === 'steady' }).toEqual({
          scenario,
          faults: true,
        });
        expect({ scenario, delivered: row.delivered > 0 }).toEqual({ scenario, delivered: true });
      }
      const total = result.rows.at(-1)!;
      expect(total.expected).toBe(
        total.delivered + total.gap + total.missed + total.unknown + total.lost + total.reordered,
      );
      // The promise: nothing silently lost, duplicated or reordered (which, where: details).
      expect(result.details).toEqual([]);
      expect({
        lost: total.lost,
        duplicates: total.duplicates,
        reordered: total.reordered,
      }).toEqual({ lost: 0, duplicates: 0, reordered: 0 });
      // The raw-protocol subscribers on C (no RpcClient to repair a hole for them) were there
      // for the partition, and the server told them what C lost: a gap signal to the one with a
      // position, `missed` to the plain one. Their losses count in the total above as well.
      const raw = (scenario: string) => result.rawRows.find((r) => r.scenario === scenario)!;
      expect(raw('raw partition')).toMatchObject({ faults: 1 });
      expect(raw('raw partition').gap).toBeGreaterThan(0);
      expect(raw('raw partition').missed).toBeGreaterThan(0);
      expect(raw('raw all')).toMatchObject({ lost: 0, duplicates: 0, reordered: 0 });
      // Nothing else wrong either: wrong seqs or counts, errors, a node new clients cannot use.
      expect(result.problems).toEqual([]);
      const probed = result.probes.map((p) => `${p.scenario} ${p.node}: ${p.ok ? 'ok' : p.error}`);
      expect(probed.filter((p) => !p.endsWith(': ok'))).toEqual([]);
      for (const scenario of ['node-kill', 'partition', 'drain']) {
        expect(probed.some((p) => p.startsWith(`${scenario} `))).toBe(true);
      }
    },
    150_000,
  );
});
