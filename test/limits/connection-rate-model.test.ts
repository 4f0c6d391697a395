/**
 * Admission's connection rate per address (connectionsPerSecondPerIp) against a model: a token
 * bucket per address group that every kept connection admitted (WebSocket, event stream, TCP)
 * takes from, HTTP POST exchanges and pipes never; closing connections gives nothing back; a
 * refusal's Retry-After is the whole seconds until a token, at least 1; no more entries than
 * maxConnections, and none once every connection closed and the buckets refilled.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { TransportKind } from '../../src/transport/transport.js';
import { Admission } from '../../src/server/admission.js';
import type { Refusal } from '../../src/server/admission.js';
import { addressGroupOf } from '../../src/server/address-group.js';
import type { UpgradeRequest } from '../../src/server/options.js';
import { describeStream } from '../../src/server/upgrade-request.js';

/** What admission reads of a connection: its transport and address. */
function requestOf(transport: TransportKind, remoteAddress: string): UpgradeRequest {
  return { ...describeStream('stdio', undefined), transport, remoteAddress };
}

/** Two of them share a /64: one group. */
const ADDRESSES = ['10.0.0.1', '10.0.0.2', '2001:db8::1', '2001:db8::2', '::ffff:10.0.0.1'];
const KINDS: TransportKind[] = ['websocket', 'sse', 'tcp', 'http', 'stdio'];

type Op =
  | { kind: 'open'; address: string; transport: TransportKind }
  | { kind: 'close'; index: number }
  | { kind: 'advance'; ms: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('open' as const),
    address: fc.constantFrom(...ADDRESSES),
    transport: fc.constantFrom(...KINDS),
  }),
  fc.record({ kind: fc.constant('close' as const), index: fc.nat(20) }),
  fc.record({
    kind: fc.constant('advance' as const),
    ms: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 5_000 })),
  }),
);

/** The model's bucket of one group. */
interface Bucket {
  tokens: number;
  at: number;
}

const counted = (transport: TransportKind) => transport !== 'http' && transport !== 'stdio';

describe('Admission: connectionsPerSecondPerIp', () => {
  it('admits a kept connection exactly while its group has a token, and keeps no more than it must', () => {
    fc.assert(
      fc.property(
        // Rates under one a second too (the option is not an integer): with one or more a
        // second every Retry-After is 1, and any Retry-After of 1 would pass.
        fc.oneof(
          fc.integer({ min: 1, max: 50 }),
          fc.double({ min: 0.05, max: 1, noNaN: true, noDefaultInfinity: true }),
        ),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 3, max: 8 }),
        fc.integer({ min: 1, max: 8 }),
        // Full-length runs: at fast-check's default size a run is ~5 steps, and a group out of
        // tokens (a refusal for the rate, its Retry-After) came up in 7 runs of 300.
        fc.array(op, { maxLength: 120, size: 'max' }),
        (perSecond, burst, maxConnections, maxConnectionsPerIp, ops) => {
          let now = 5_000_000;
          const admission = new Admission(
            {
              maxConnections,
              maxConnectionsPerIp,
              connectionsPerSecondPerIp: perSecond,
              connectionsBurstPerIp: burst,
            },
            undefined,
            undefined,
            () => now,
          );
          // A millisecond's refill: how far the model may be from the gateway's bucket (an
          // entry is dropped within a millisecond of full, and sums of refills round).
          const slack = perSecond / 1_000 + 1e-9;
          const buckets = new Map<string, Bucket>();
          const open: { transport: TransportKind; address: string; release: () => void }[] = [];
          const bucketOf = (group: string): Bucket => {
            const bucket = buckets.get(group) ?? { tokens: burst, at: now };
            bucket.tokens = Math.min(
              burst,
              bucket.tokens + ((now - bucket.at) * perSecond) / 1_000,
            );
            bucket.at = now;
            buckets.set(group, bucket);
            return bucket;
          };

          for (const step of ops) {
            if (step.kind === 'advance') {
              now += step.ms;
              continue;
            }
            if (step.kind === 'close') {
              const connection = open.splice(step.index % Math.max(1, open.length), 1)[0];
              connection?.release();
              continue;
            }
            const { address, transport } = step;
            const group = addressGroupOf(transport, address);
            const full = open.length >= maxConnections;
            const fromGroup =
              group === undefined
                ? 0
                : open.filter((c) => addressGroupOf(c.transport, c.address) === group).length;
            const outcome = admission.admit(requestOf(transport, address));
            if (full) {
              expect((outcome as Refusal).reason).toBe('capacity');
              continue;
            }
            if (fromGroup >= maxConnectionsPerIp) {
              expect((outcome as Refusal).reason).toBe('ip-limit');
              continue;
            }
            if (!counted(transport)) {
              expect(typeof outcome).toBe('function');
              open.push({ transport, address, release: outcome as () => void });
              continue;
            }
            const bucket = bucketOf(group!);
            if (typeof outcome === 'function') {
              expect(bucket.tokens).toBeGreaterThan(1 - slack);
              bucket.tokens = Math.max(0, bucket.tokens - 1);
              open.push({ transport, address, release: outcome });
              continue;
            }
            expect(outcome.reason).toBe('ip-rate');
            expect(outcome.status).toBe(429);
            expect(bucket.tokens).toBeLessThan(1 + slack);
            // Retry-After: whole seconds, at least 1, and enough for a token to be there.
            const retryAfter = Number(outcome.headers!['Retry-After']);
            const wait = (1 - bucket.tokens) / perSecond;
            expect(Number.isInteger(retryAfter)).toBe(true);
            expect(retryAfter).toBeGreaterThanOrEqual(Math.max(1, wait - slack));
            expect(retryAfter).toBeLessThan(Math.max(1, wait) + 1 + slack);
            expect(admission.rateEntries).toBeLessThanOrEqual(maxConnections);
          }
          expect(admission.rateEntries).toBeLessThanOrEqual(maxConnections);

          // Every connection closed, and time for every bucket to refill: none kept but the one
          // a new connection takes from (and leaves short of full) after.
          for (const connection of open.splice(0)) connection.release();
          expect(admission.connections).toBe(0);
          now += Math.ceil((burst * 1_000) / perSecond) + 1;
          const last = admission.admit(requestOf('tcp', '192.0.2.1'));
          expect(typeof last).toBe('function');
          (last as () => void)();
          expect(admission.rateEntries).toBe(1);
        },
      ),
      { numRuns: 300 },
    );
  });
});
