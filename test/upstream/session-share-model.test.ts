// The upstream's two concurrency bounds against a model: every call of a session is counted
// against that session's share (maxConcurrentPerSession) and the upstream's maxConcurrent from
// the moment it is accepted until its slot is freed: when answered or, for a transport that
// keeps aborted requests, when the transport lets go of a request its caller gave up.
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

/** One call as the model holds it: its session, whether its caller was answered, its slot. */
interface ModelCall {
  session: number;
  controller: AbortController;
  request: UpstreamRequest | undefined;
  answered: boolean;
  holdsSlot: boolean;
}

const SESSIONS = 3;
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('per-session and shared counts against a model', () => {
  it("a call is refused exactly when its session's share or the upstream's bound is full, and in-flight counts are the model's", async () => {
    const step = fc.oneof(
      fc.record({ kind: fc.constant('call' as const), session: fc.nat(SESSIONS - 1) }),
      fc.record({ kind: fc.constant('answer' as const), pick: fc.nat(20) }),
      fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat(20) }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 6 }),
        fc.boolean(),
        fc.array(step, { maxLength: 40 }),
        async (maxConcurrent, share, keepsAbortedRequests, steps) => {
          const maxConcurrentPerSession = Math.min(share, maxConcurrent);
          const endpoint = new HeldEndpoint({
            maxConcurrent,
            maxConcurrentPerSession,
            keepsAbortedRequests,
          });
          const sessions = Array.from({ length: SESSIONS }, () => ({}));
          const calls: ModelCall[] = [];
          const slots = (session?: number) =>
            calls.filter((c) => c.holdsSlot && (session === undefined || c.session === session))
              .length;
          for (const s of steps) {
            if (s.kind === 'call') {
              const controller = new AbortController();
              const expectedBound =
                slots(s.session) >= maxConcurrentPerSession
                  ? 'maxConcurrentPerSession'
                  : slots() >= maxConcurrent
                    ? 'maxConcurrent'
                    : undefined;
              const before = endpoint.open.length;
              const answer = endpoint.call('m', undefined, {
                timeoutMs: 1_000_000,
                signal: controller.signal,
                session: sessions[s.session]!,
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
                // Kept by the transport: its slot stays until the transport settles it.
                if (!keepsAbortedRequests) {
                  call.holdsSlot = false;
                  endpoint.open.find((o) => o.request === call.request)?.settle();
                  call.request = undefined;
                }
              }
              await flush();
            }
            expect(endpoint.inFlight).toBe(slots());
            for (let i = 0; i < SESSIONS; i++) {
              expect(endpoint.inFlightOf(sessions[i]!)).toBe(slots(i));
              expect(slots(i)).toBeLessThanOrEqual(maxConcurrentPerSession);
            }
            expect(slots()).toBeLessThanOrEqual(maxConcurrent);
          }
          for (const entry of [...endpoint.open]) entry.settle();
          await flush();
          expect(endpoint.inFlight).toBe(0);
          for (const session of sessions) expect(endpoint.inFlightOf(session)).toBe(0);
        },
      ),
      { numRuns: 200 },
    );
  });
});
