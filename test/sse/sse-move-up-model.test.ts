/**
 * fallbackSocket's move back to WebSocket, as a model: calls made, answered and the move in any
 * order. Every call reaches the server once and is answered once, with its own answer; none is
 * rejected because of the move.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { kinds, moveUpSetUp, outcome } from './move-up.js';
import { waitUntil, within } from '../support/waiting.js';

type Step = 'call' | 'answer oldest' | 'answer newest' | 'unblock' | 'probe open' | 'turn';

const step = fc.constantFrom<Step>(
  'call',
  'call',
  'answer oldest',
  'answer newest',
  'unblock',
  'probe open',
  'turn',
);

describe('fallbackSocket: the move back to WebSocket (model)', () => {
  it('answers every call once, whatever the order of calls, answers and the move', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 14 }), async (steps) => {
        const local: (() => unknown)[] = [];
        try {
          const { gateway, rpc, held, blockable } = await moveUpSetUp(local);
          const outcomes: Promise<string>[] = [];
          const answered = new Set<number>();
          const answer = (index: number) => {
            if (index < 0 || answered.has(index) || !held[index]) return;
            answered.add(index);
            held[index]!.answer.resolve(`answer ${String(held[index]!.params)}`);
          };
          const unanswered = () => held.map((_, i) => i).filter((i) => !answered.has(i));
          let unblocked = false;
          for (const next of steps) {
            if (next === 'call') outcomes.push(outcome(rpc.call('held', [outcomes.length])));
            else if (next === 'answer oldest') answer(unanswered()[0] ?? -1);
            else if (next === 'answer newest') answer(unanswered().at(-1) ?? -1);
            else if (next === 'unblock') {
              blockable.unblock();
              unblocked = true;
            } else if (next === 'probe open' && unblocked) {
              await waitUntil(() => blockable.opened >= 1, 'a WebSocket open');
            } else await new Promise((resolve) => setImmediate(resolve));
          }
          blockable.unblock();
          // Whatever is still out is answered as it reaches the server, until every call is.
          let settled = false;
          const all = Promise.all(outcomes).finally(() => (settled = true));
          await waitUntil(() => {
            for (const i of unanswered()) answer(i);
            return settled;
          }, 'every call settled');
          const results = await within(all, 'the outcomes');
          expect(results).toEqual(outcomes.map((_, i) => `resolved answer ${i}`));
          // Each call ran once on the server.
          expect(held.map((entry) => (entry.params as [number])[0]).sort((a, b) => a - b)).toEqual(
            outcomes.map((_, i) => i),
          );
          expect(held.some((entry) => entry.aborted)).toBe(false);
          await waitUntil(() => kinds(gateway).join() === 'websocket', 'the move to WebSocket');
        } finally {
          for (const cleanup of local.splice(0).reverse()) await cleanup();
        }
      }),
      { numRuns: 25 },
    );
  }, 120_000);
});
