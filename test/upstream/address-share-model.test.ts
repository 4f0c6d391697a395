// The upstream's concurrency bounds against a model: every call is counted against its session's
// share (maxConcurrentPerSession), its user's (maxConcurrentPerUser; none for an anonymous
// session), its client address group's (maxConcurrentPerAddress; IPv6 by /64, none for a session
// without an address) and the upstream's maxConcurrent, of which the last reservedForNewCallers
// slots go only to a call whose session, address group and user have none in flight, from the
// moment it is accepted until its slot is freed: when answered or, for a transport that keeps aborted requests, when the
// transport lets go of a request its caller gave up. An address's or a user's entry exists only
// while it has calls in flight.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { UpstreamEndpoint, UpstreamError } from '../../src/upstream/index.js';
import type { UpstreamRequest } from '../../src/upstream/upstream-endpoint.js';

/** A transport whose requests stay open until the test settles them. */
class HeldEndpoint extends UpstreamEndpoint {
  protected override readonly keepsAbortedRequests: boolean;
  readonly open: { request: UpstreamRequest; settle: () => void }[] = [];

  constructor(options: {
    maxConcurrent: number;
    maxConcurrentPerSession: number;
    maxConcurrentPerAddress: number;
    maxConcurrentPerUser: number;
    reservedForNewCallers: number;
    keepsAbortedRequests: boolean;
  }) {
    super({ name: 'held', retries: 0, ...options });
    this.keepsAbortedRequests = options.keepsAbortedRequests;
  }

  protected attempt(request: UpstreamRequest): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const entry = {
        request,
        settle: () => {
          this.open.splice(this.open.indexOf(entry), 1);
          if (request.aborted) reject(request.abortReason as Error);
          else resolve('ok');
        },
      };
      this.open.push(entry);
    });
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * The sessions' client addresses: two sessions from one IPv4 address, two from addresses of one
 * IPv6 /64 (one group), one IPv4-mapped (the first group) and two without an address (stdio);
 * and their users: ann's sessions from both groups and without an address, bob's from one group,
 * two anonymous sessions (one of them without an address: only its session counts it).
 */
const SESSIONS: readonly {
  address: string | undefined;
  group: string | undefined;
  user: string | undefined;
}[] = [
  { address: '10.0.0.1', group: 'v4', user: 'ann' },
  { address: '10.0.0.1', group: 'v4', user: 'bob' },
  { address: '2001:db8:1:2::5', group: 'v6', user: 'ann' },
  { address: '2001:db8:1:2:ffff::9', group: 'v6', user: undefined },
  { address: '::ffff:10.0.0.1', group: 'v4', user: 'bob' },
  { address: undefined, group: undefined, user: 'ann' },
  { address: undefined, group: undefined, user: undefined },
];
const GROUPS = ['v4', 'v6'] as const;
const USERS = ['ann', 'bob'] as const;

interface ModelCall {
  session: number;
  controller: AbortController;
  request: UpstreamRequest | undefined;
  answered: boolean;
  holdsSlot: boolean;
  /** Admitted while its session, address group or user had a call in flight. */
  admittedCalling: boolean;
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('per-session, per-user, per-address and shared counts against a model', () => {
  it('a call is refused exactly when a bound it counts under is full (session, user, upstream, address: the first full one named), counts are never above any bound, and all return to 0 with no address or user entry left', async () => {
    const step = fc.oneof(
      fc.record({ kind: fc.constant('call' as const), session: fc.nat(SESSIONS.length - 1) }),
      fc.record({ kind: fc.constant('answer' as const), pick: fc.nat(20) }),
      fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat(20) }),
    );
    // maxConcurrent, then per address (at most it), per session (at most that), per user (from
    // the session's share to maxConcurrent), the slots kept for new callers (below maxConcurrent).
    const bounds = fc
      .integer({ min: 1, max: 8 })
      .chain((maxConcurrent) =>
        fc
          .integer({ min: 1, max: maxConcurrent })
          .chain((perAddress) =>
            fc
              .integer({ min: 1, max: perAddress })
              .chain((perSession) =>
                fc.tuple(
                  fc.constant(maxConcurrent),
                  fc.constant(perAddress),
                  fc.constant(perSession),
                  fc.integer({ min: perSession, max: maxConcurrent }),
                  fc.integer({ min: 0, max: maxConcurrent - 1 }),
                ),
              ),
          ),
      );
    await fc.assert(
      fc.asyncProperty(
        bounds,
        fc.boolean(),
        fc.array(step, { maxLength: 50, size: 'max' }),
        async (
          [
            maxConcurrent,
            maxConcurrentPerAddress,
            maxConcurrentPerSession,
            maxConcurrentPerUser,
            reservedForNewCallers,
          ],
          keeps,
          steps,
        ) => {
          const endpoint = new HeldEndpoint({
            maxConcurrent,
            maxConcurrentPerSession,
            maxConcurrentPerAddress,
            maxConcurrentPerUser,
            reservedForNewCallers,
            keepsAbortedRequests: keeps,
          });
          const sessions = SESSIONS.map(() => ({}));
          const calls: ModelCall[] = [];
          const slots = (which: (call: ModelCall) => boolean = () => true) =>
            calls.filter((c) => c.holdsSlot && which(c)).length;
          const ofSession = (i: number) => slots((c) => c.session === i);
          const ofGroup = (group: string) => slots((c) => SESSIONS[c.session]!.group === group);
          const ofUser = (user: string) => slots((c) => SESSIONS[c.session]!.user === user);
          for (const s of steps) {
            if (s.kind === 'call') {
              const { address, group, user } = SESSIONS[s.session]!;
              const controller = new AbortController();
              // A caller already calling: its session, its address group or its user has a call
              // in flight.
              const calling =
                ofSession(s.session) > 0 ||
                (group !== undefined && ofGroup(group) > 0) ||
                (user !== undefined && ofUser(user) > 0);
              const expectedBound =
                ofSession(s.session) >= maxConcurrentPerSession
                  ? 'maxConcurrentPerSession'
                  : user !== undefined && ofUser(user) >= maxConcurrentPerUser
                    ? 'maxConcurrentPerUser'
                    : slots() >= maxConcurrent
                      ? 'maxConcurrent'
                      : calling && slots() >= maxConcurrent - reservedForNewCallers
                        ? 'reservedForNewCallers'
                        : group !== undefined && ofGroup(group) >= maxConcurrentPerAddress
                          ? 'maxConcurrentPerAddress'
                          : undefined;
              const before = endpoint.open.length;
              const answer = endpoint.call('m', undefined, {
                timeoutMs: 1_000_000,
                signal: controller.signal,
                session: sessions[s.session]!,
                ...(address === undefined ? {} : { address }),
                ...(user === undefined ? {} : { user }),
              });
              if (expectedBound !== undefined) {
                const err = await answer.then(
                  () => undefined,
                  (e: unknown) => e,
                );
                expect(err).toBeInstanceOf(UpstreamError);
                expect((err as UpstreamError).data).toMatchObject({ bound: expectedBound });
                continue;
              }
              answer.catch(() => undefined);
              await flush();
              expect(endpoint.open.length).toBe(before + 1);
              calls.push({
                session: s.session,
                controller,
                request: endpoint.open.at(-1)!.request,
                answered: false,
                holdsSlot: true,
                admittedCalling: calling,
              });
            } else {
              const live = calls.filter((c) =>
                s.kind === 'answer'
                  ? endpoint.open.some((o) => o.request === c.request)
                  : !c.answered,
              );
              if (live.length === 0) continue;
              const call = live[s.pick % live.length]!;
              if (s.kind === 'answer') {
                endpoint.open.find((o) => o.request === call.request)!.settle();
                call.request = undefined;
                call.answered = true;
                call.holdsSlot = false;
              } else {
                call.controller.abort(new Error('cancelled'));
                call.answered = true;
                // Kept by the transport: its slots stay until the transport settles it.
                if (!keeps) {
                  call.holdsSlot = false;
                  endpoint.open.find((o) => o.request === call.request)?.settle();
                  call.request = undefined;
                }
              }
              await flush();
            }
            expect(endpoint.inFlight).toBe(slots());
            expect(slots()).toBeLessThanOrEqual(maxConcurrent);
            // What the kept slots promise: callers already calling never hold them.
            expect(slots((c) => c.admittedCalling)).toBeLessThanOrEqual(
              maxConcurrent - reservedForNewCallers,
            );
            SESSIONS.forEach((_, i) => {
              expect(endpoint.inFlightOf(sessions[i]!)).toBe(ofSession(i));
              expect(ofSession(i)).toBeLessThanOrEqual(maxConcurrentPerSession);
            });
            for (const group of GROUPS) {
              expect(ofGroup(group)).toBeLessThanOrEqual(maxConcurrentPerAddress);
            }
            expect(endpoint.inFlightFrom('10.0.0.1')).toBe(ofGroup('v4'));
            expect(endpoint.inFlightFrom('2001:db8:1:2::1')).toBe(ofGroup('v6'));
            expect(endpoint.addressesInFlight).toBe(GROUPS.filter((g) => ofGroup(g) > 0).length);
            for (const user of USERS) {
              expect(endpoint.inFlightFor(user)).toBe(ofUser(user));
              expect(ofUser(user)).toBeLessThanOrEqual(maxConcurrentPerUser);
            }
            expect(endpoint.usersInFlight).toBe(USERS.filter((u) => ofUser(u) > 0).length);
          }
          for (const entry of [...endpoint.open]) entry.settle();
          await flush();
          expect(endpoint.inFlight).toBe(0);
          for (const session of sessions) expect(endpoint.inFlightOf(session)).toBe(0);
          expect(endpoint.addressesInFlight).toBe(0);
          expect(endpoint.usersInFlight).toBe(0);
        },
      ),
      { numRuns: 200 },
    );
  });
});
