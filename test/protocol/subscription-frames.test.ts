/**
 * The read side of the subscription protocol, defined once (src/protocol/subscription-frames.ts)
 * for the client and the CLI; the frames the server writes (src/pubsub/frames.ts) read back as
 * what they say.
 */
import { describe, expect, it } from 'vitest';
import { isErrorObject } from '../../src/protocol/errors.js';
import {
  DEFAULT_SUBSCRIPTION_METHODS,
  decodeSubscriptionNotification,
  isSubscriptionId,
} from '../../src/protocol/subscription-frames.js';
import {
  epochTail,
  finalTail,
  gapTail,
  messageTail,
  missedPart,
  notificationHead,
  positionTail,
} from '../../src/pubsub/frames.js';
import { defaultSubscriptionMethods } from '../../src/server/pubsub-types.js';

const decode = (params: unknown) => decodeSubscriptionNotification(params);

describe('decodeSubscriptionNotification', () => {
  it('reads each kind', () => {
    const s = 'sub';
    expect(decode({ subscription: s, seq: 7, result: { a: 1 } })).toEqual({
      subscription: s,
      update: { kind: 'message', result: { a: 1 }, seq: 7 },
    });
    expect(decode({ subscription: s, result: null, missed: 3 })?.update).toEqual({
      kind: 'message',
      result: null,
      missed: 3,
    });
    expect(decode({ subscription: s, seq: 4, epoch: 'e1' })?.update).toEqual({
      kind: 'position',
      seq: 4,
      epoch: 'e1',
    });
    expect(decode({ subscription: s, epoch: 'e2' })?.update).toEqual({
      kind: 'epoch',
      epoch: 'e2',
    });
    expect(decode({ subscription: s, gap: 5 })?.update).toEqual({ kind: 'gap', gap: 5 });
    expect(decode({ subscription: s, gap: null, epoch: 'e3' })?.update).toEqual({
      kind: 'gap',
      gap: null,
      epoch: 'e3',
    });
    expect(decode({ subscription: s, complete: true })?.update).toEqual({ kind: 'complete' });
    expect(decode({ subscription: s, error: { code: 5, message: 'm', data: 1 } })?.update).toEqual({
      kind: 'error',
      error: { code: 5, message: 'm', data: 1 },
    });
    expect(decode({ subscription: s })?.update).toEqual({ kind: 'other' });
    expect(decode({ subscription: s, seq: 'x' })?.update).toEqual({ kind: 'other' });
  });

  it('in this order: error, complete, gap, result, seq, epoch', () => {
    const all = { subscription: 1, seq: 1, epoch: 'e', result: 1, gap: 2, complete: true };
    expect(decode({ ...all, error: { code: 1, message: 'm' } })?.update.kind).toBe('error');
    expect(decode(all)?.update.kind).toBe('complete');
    expect(decode({ ...all, complete: false })?.update.kind).toBe('gap');
    const { gap: _gap, ...noGap } = all;
    expect(decode({ ...noGap, complete: false })?.update.kind).toBe('message');
  });

  it('a gap that is not a number is of unknown size; ill-typed seq and missed are left out', () => {
    expect(decode({ subscription: 's', gap: 'many' })?.update).toEqual({ kind: 'gap', gap: null });
    expect(decode({ subscription: 's', result: 1, seq: '1', missed: '2' })?.update).toEqual({
      kind: 'message',
      result: 1,
    });
  });

  it('a stream error that is not an error object ends the stream as -32603, the value in data', () => {
    for (const error of ['boom', { code: 1.5, message: 'm' }, { code: 1 }, null, [1]]) {
      expect(decode({ subscription: 's', error })?.update).toEqual({
        kind: 'error',
        error: {
          code: -32603,
          message: `the stream ended with an error: ${JSON.stringify(error)}`,
          data: error,
        },
      });
    }
  });

  it('a stream error nested too deep for JSON.stringify ends the stream all the same, unquoted', () => {
    // As JSON.parse reads a frame: any depth, where JSON.stringify overflows the stack.
    const deep: unknown = JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`);
    expect(decode({ subscription: 's', error: deep })?.update).toEqual({
      kind: 'error',
      error: {
        code: -32603,
        message: 'the stream ended with an error: a value nested too deep to quote',
        data: deep,
      },
    });
  });

  it('ids are strings or numbers, for client and CLI alike; anything else is not a subscription notification', () => {
    expect(decode({ subscription: '0x1', result: 1 })?.subscription).toBe('0x1');
    expect(decode({ subscription: 7, result: 1 })?.subscription).toBe(7);
    expect(decode({ subscription: 0, result: 1 })?.subscription).toBe(0);
    const notIds: unknown[] = [null, true, {}, ['a'], Infinity, NaN, undefined];
    for (const [i, subscription] of notIds.entries()) {
      expect(decode({ subscription, result: 1 }), `case ${i}`).toBeUndefined();
    }
    for (const params of [undefined, null, 'x', ['0x1', 1], 5]) {
      expect(decode(params)).toBeUndefined();
    }
    expect(isSubscriptionId('')).toBe(true);
    expect(isSubscriptionId(1.5)).toBe(true);
  });

  it("reads back every frame the server's encoders write", () => {
    const head = notificationHead('subscription');
    const read = (tail: string) => {
      const frame = JSON.parse(`${head}"0x1"${tail}`) as { method: string; params: unknown };
      expect(frame.method).toBe(DEFAULT_SUBSCRIPTION_METHODS.notification);
      return decode(frame.params);
    };
    expect(read(messageTail('{"p":1}', 9))).toEqual({
      subscription: '0x1',
      update: { kind: 'message', result: { p: 1 }, seq: 9 },
    });
    expect(read(`${missedPart(4)}${messageTail('2')}`)?.update).toEqual({
      kind: 'message',
      result: 2,
      missed: 4,
    });
    expect(read(gapTail(3, 'ep'))?.update).toEqual({ kind: 'gap', gap: 3, epoch: 'ep' });
    expect(read(gapTail(null))?.update).toEqual({ kind: 'gap', gap: null });
    expect(read(epochTail('ep'))?.update).toEqual({ kind: 'epoch', epoch: 'ep' });
    expect(read(positionTail(12, 'ep'))?.update).toEqual({
      kind: 'position',
      seq: 12,
      epoch: 'ep',
    });
    expect(read(finalTail())?.update).toEqual({ kind: 'complete' });
    expect(read(finalTail({ code: -32000, message: 'x' }))?.update).toEqual({
      kind: 'error',
      error: { code: -32000, message: 'x' },
    });
  });
});

describe('the default method names', () => {
  it('are one set, used by the server', () => {
    expect(DEFAULT_SUBSCRIPTION_METHODS).toEqual({
      subscribe: 'subscribe',
      notification: 'subscription',
      unsubscribe: 'unsubscribe',
      history: 'topic.history',
    });
    expect(defaultSubscriptionMethods).toEqual(DEFAULT_SUBSCRIPTION_METHODS);
    expect(Object.isFrozen(DEFAULT_SUBSCRIPTION_METHODS)).toBe(true);
  });
});

describe('isErrorObject (spec 5.1)', () => {
  it('an object with an integer code and a string message', () => {
    expect(isErrorObject({ code: -32601, message: 'Method not found' })).toBe(true);
    expect(isErrorObject({ code: 1, message: '', data: { any: 1 } })).toBe(true);
    for (const value of [
      null,
      undefined,
      'error',
      [],
      [{ code: 1, message: 'm' }],
      { code: 1.5, message: 'm' },
      { code: '1', message: 'm' },
      { code: NaN, message: 'm' },
      { code: 1 },
      { message: 'm' },
      { code: 1, message: 2 },
    ]) {
      expect(isErrorObject(value), JSON.stringify(value)).toBe(false);
    }
  });
});
