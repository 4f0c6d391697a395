/**
 * The conditions layers add to a gateway's readiness (the server API's consumer adds one),
 * against a model: /readyz reports the reason of the first condition, in the order added, that
 * gives one, and `ready` when none does or all were removed; removing one twice, or one added
 * twice by the same function, takes out only that one.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { ReadinessConditions } from '../../src/server/http-routes.js';
import type { Readiness, ReadinessCondition } from '../../src/server/http-routes.js';

type Reason = Exclude<Readiness, 'ready'>;
const REASONS: readonly Reason[] = [
  'draining',
  'broker-unavailable',
  'not-listening',
  'server-api-consumer-unavailable',
];

type Op =
  | { kind: 'add'; source: number }
  | { kind: 'remove'; index: number }
  | { kind: 'set'; source: number; reason: Reason | undefined };

/** Conditions read from a few sources, so one function may be added more than once. */
const SOURCES = 3;

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('add' as const), source: fc.nat(SOURCES - 1) }),
  fc.record({ kind: fc.constant('remove' as const), index: fc.nat(10) }),
  fc.record({
    kind: fc.constant('set' as const),
    source: fc.nat(SOURCES - 1),
    reason: fc.option(fc.constantFrom(...REASONS), { nil: undefined }),
  }),
);

it('reports the first reason among the conditions in place, in the order added', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
      const conditions = new ReadinessConditions();
      const reasons: (Reason | undefined)[] = Array.from({ length: SOURCES }, () => undefined);
      const read: ReadinessCondition[] = reasons.map((_, source) => () => reasons[source]);
      /** Every condition added: its source, its remover, whether it is still in place. */
      const added: { source: number; remove: () => void; live: boolean }[] = [];
      for (const step of ops) {
        if (step.kind === 'add') {
          added.push({
            source: step.source,
            remove: conditions.add(read[step.source]!),
            live: true,
          });
        } else if (step.kind === 'remove') {
          const entry = added[step.index];
          if (!entry) continue;
          entry.remove();
          entry.live = false;
        } else {
          reasons[step.source] = step.reason;
        }
        const expected = added
          .filter((entry) => entry.live)
          .map((entry) => reasons[entry.source])
          .find((reason) => reason !== undefined);
        expect(conditions.notReady()).toBe(expected);
      }
    }),
  );
});
