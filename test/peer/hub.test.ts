/*
 * Hub (src/peer/hub.ts): each value goes to the observers there are when it is sent, whoever
 * comes or goes between sends or while one is being sent.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Hub } from '../../src/peer/hub.js';
import { fullGc } from '../support/heap.js';

type Op = { kind: 'add' } | { kind: 'remove'; pick: number } | { kind: 'send' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.constant({ kind: 'add' } as const),
  fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }),
  fc.constant({ kind: 'send' } as const),
);

describe('Hub', () => {
  it('sends each value to exactly the observers there are at the time (model)', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 40 }), (ops) => {
        const hub = new Hub<number>();
        const got: number[][] = [];
        const expected: number[][] = [];
        const live: { index: number; unsubscribe: () => void }[] = [];
        let sent = 0;
        for (const op of ops) {
          if (op.kind === 'add') {
            const index = got.length;
            got.push([]);
            expected.push([]);
            const sub = hub.observable.subscribe((v) => got[index]!.push(v));
            live.push({ index, unsubscribe: () => sub.unsubscribe() });
          } else if (op.kind === 'remove') {
            if (live.length === 0) continue;
            const [gone] = live.splice(op.pick % live.length, 1);
            gone!.unsubscribe();
          } else {
            sent++;
            for (const { index } of live) expected[index]!.push(sent);
            hub.next(sent);
          }
        }
        expect(got).toEqual(expected);
      }),
    );
  });

  it('an observer that comes while a value is sent gets the next one, not that one', () => {
    const hub = new Hub<number>();
    const got: string[] = [];
    let late: { unsubscribe(): void } | undefined;
    hub.observable.subscribe((v) => {
      got.push(`first ${v}`);
      if (v === 1) {
        // One leaves before its turn, and a newcomer joins: the newcomer gets the next value.
        second.unsubscribe();
        late = hub.observable.subscribe((w) => got.push(`late ${w}`));
      }
    });
    const second = hub.observable.subscribe((v) => got.push(`second ${v}`));
    hub.next(1);
    hub.next(2);
    late!.unsubscribe();
    hub.next(3);
    // `second` left before its turn: an rxjs subscriber gets nothing once unsubscribed.
    expect(got).toEqual(['first 1', 'first 2', 'late 2', 'first 3']);
  });

  it('an observer that comes while a value is sent, with no one leaving, gets the next one', () => {
    const hub = new Hub<number>();
    const got: string[] = [];
    hub.observable.subscribe((v) => {
      got.push(`first ${v}`);
      if (v === 1) hub.observable.subscribe((w) => got.push(`late ${w}`));
    });
    hub.next(1);
    hub.next(2);
    expect(got).toEqual(['first 1', 'first 2', 'late 2']);
  });

  it('replaying: a value or an end sent by an observer while another is sent wins; every observer still there ends on the current value (model)', () => {
    // Observer i, on seeing value v, sends reaction[i][v] (a value, or -1: the hub ends) once.
    const values = 5;
    const reactionArb = fc.array(
      fc.array(fc.option(fc.integer({ min: -1, max: values - 1 }), { nil: undefined }), {
        minLength: values,
        maxLength: values,
      }),
      { minLength: 1, maxLength: 4 },
    );
    fc.assert(
      fc.property(
        reactionArb,
        fc.array(fc.nat(values - 1), { maxLength: 6 }),
        (reactions, sends) => {
          const hub = new Hub<number>(0, true);
          const seen: number[][] = reactions.map(() => []);
          const ended = reactions.map(() => false);
          const fired = reactions.map(() => new Set<number>());
          reactions.forEach((reaction, i) => {
            hub.watch({
              next: (v) => {
                expect(ended[i]).toBe(false);
                seen[i]!.push(v);
                const react = reaction[v];
                if (react === undefined || fired[i]!.has(v)) return;
                fired[i]!.add(v);
                if (react === -1) hub.complete();
                else hub.next(react);
              },
              complete: () => (ended[i] = true),
            });
          });
          for (const v of sends) hub.next(v);
          // Each observer still there ends on the hub's value: none is left on one since
          // replaced. (One the hub ended on was told so, and nothing after it.)
          seen.forEach((got, i) => {
            if (!ended[i]) expect(got.at(-1)).toBe(hub.value);
          });
        },
      ),
      { numRuns: 500 },
    );
  });

  it('keeps no value it sent unless it replays: a sent message can be collected once its observers are done', async () => {
    const plain = new Hub<object>();
    const replaying = new Hub<object>(undefined, true);
    let sentPlain: WeakRef<object> | undefined;
    let sentReplayed: WeakRef<object> | undefined;
    const send = (): void => {
      const a = { k: 1 };
      const b = { k: 2 };
      sentPlain = new WeakRef(a);
      sentReplayed = new WeakRef(b);
      plain.next(a);
      replaying.next(b);
    };
    plain.observable.subscribe(() => undefined);
    send();
    // A WeakRef's target lives to the end of the job that made it.
    await new Promise((resolve) => setTimeout(resolve, 0));
    fullGc();
    expect(sentPlain!.deref()).toBeUndefined();
    // The replaying hub holds its current value for the next observer.
    expect(sentReplayed!.deref()).toEqual({ k: 2 });
    expect(replaying.value).toEqual({ k: 2 });
  });
});
