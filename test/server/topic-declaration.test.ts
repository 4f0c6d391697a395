/**
 * gateway.topic and gateway.stream check their options as createGateway checks its own: an unknown
 * key is refused naming the nearest known one, a value of the wrong type (TypeError) or out of
 * range (RangeError) naming the option, and nothing is declared.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { EMPTY, of } from 'rxjs';
import { RawRpc } from '../support/raw-rpc.js';
import { createGateway } from '../../src/server/gateway.js';
import type { Gateway } from '../../src/server/gateway.js';
import { silentLogger } from '../../src/peer/logger.js';

let gateway: Gateway<unknown> | undefined;
afterEach(async () => {
  await gateway?.close();
  gateway = undefined;
});

function fresh(): Gateway<unknown> {
  gateway = createGateway({ logger: silentLogger });
  return gateway;
}

describe('gateway.topic options', () => {
  it.each([
    [
      { history: { maxAge: 60_000 } },
      TypeError,
      /history\.maxAge is not an option of topic "t" \(did you mean history\.maxAgeMs\?\)/,
    ],
    [
      { histroy: { maxLength: 5 } },
      TypeError,
      /histroy is not an option of topic "t" \(did you mean history\?\)/,
    ],
    [{ slowConsumr: 'drop' }, TypeError, /did you mean slowConsumer\?/],
    [
      { slowConsumer: 'keep_latest' },
      RangeError,
      /slowConsumer must be "drop" or "keep-latest" or "disconnect", not "keep_latest"/,
    ],
    [{ slowConsumer: 7 }, TypeError, /slowConsumer must be/],
    [{ highWaterMark: -1 }, RangeError, /highWaterMark must be an integer from 0/],
    [{ highWaterMark: '1mb' }, TypeError, /highWaterMark must be an integer/],
    [
      { history: { maxLength: -5 } },
      RangeError,
      /history\.maxLength must be an integer at least 0/,
    ],
    [
      { history: { maxLength: 'ten' } },
      TypeError,
      /history\.maxLength must be an integer at least 0/,
    ],
    [{ history: { maxLength: 2.5 } }, RangeError, /history\.maxLength must be/],
    [{ history: { maxAgeMs: 0 } }, RangeError, /history\.maxAgeMs must be an integer at least 1/],
    [{ history: 100 }, TypeError, /history must be an object/],
    [{ latestValue: 'yes' }, TypeError, /latestValue must be true or false/],
    [{ authorize: true }, TypeError, /authorize must be a function/],
  ])('refuses %j', (options, type, message) => {
    const gw = fresh();
    expect(() => gw.topic('t', options as never)).toThrow(type);
    expect(() => gw.topic('t', options as never)).toThrow(message);
    // Nothing was declared: the same name with valid options is taken.
    gw.topic('t', {});
  });

  it('takes every documented option, none kept (0) and unbounded (Infinity) history included', () => {
    const gw = fresh();
    gw.topic('a', {
      history: { maxLength: 0, maxAgeMs: 1 },
      slowConsumer: 'keep-latest',
      highWaterMark: 16_384,
      latestValue: true,
      authorize: () => true,
      presence: { maxListed: 10 },
    });
    gw.topic('b.*', { history: { maxLength: Infinity, maxAgeMs: Infinity } });
    gw.topic('c', { slowConsumer: 'disconnect', history: {} });
  });

  it('leaves a default in place for an option given as undefined', async () => {
    const gw = fresh();
    const unset: { hwm?: number; policy?: 'drop'; keep?: number } = {};
    gw.topic('t', {
      highWaterMark: unset.hwm,
      slowConsumer: unset.policy,
      history: { maxLength: unset.keep },
    });
    gw.stream('s', () => of('streamed'), { highWaterMark: unset.hwm, slowConsumer: unset.policy });
    const { port } = await gw.listen(0, '127.0.0.1');
    const raw = await RawRpc.open(`ws://127.0.0.1:${port}/rpc`);
    try {
      const id = (await raw.request('subscribe', ['t'])).result as string;
      const streamId = (await raw.request('subscribe', ['s'])).result as string;
      await gw.publish('t', 1);
      await raw.until(() => raw.notifications(id).some((n) => n.result === 1), 'the message');
      await raw.until(
        () => raw.notifications(streamId).some((n) => n.result === 'streamed'),
        "the stream's value",
      );
      // History kept as by default.
      expect((await gw.pubsub.broker.history('t', 0)).messages.map((m) => m.seq)).toEqual([1]);
    } finally {
      raw.socket.close();
    }
  });

  it('names the topic in a refused value', () => {
    const gw = fresh();
    expect(() => gw.topic('prices.*', { history: { maxLength: -1 } })).toThrow(
      'topic "prices.*": history.maxLength must be an integer at least 0 (0: none kept), or Infinity, not -1',
    );
  });
});

describe('gateway.stream flow', () => {
  it('refuses an unknown key and a policy or mark out of range', () => {
    const gw = fresh();
    expect(() => gw.stream('s', () => EMPTY, { slowConsumr: 'drop' } as never)).toThrow(
      /flow\.slowConsumr is not an option of stream "s" \(did you mean flow\.slowConsumer\?\)/,
    );
    expect(() => gw.stream('s', () => EMPTY, { slowConsumer: 'later' } as never)).toThrow(
      RangeError,
    );
    expect(() => gw.stream('s', () => EMPTY, { highWaterMark: -1 })).toThrow(
      /flow\.highWaterMark must be an integer from 0/,
    );
    gw.stream('s', () => EMPTY, { slowConsumer: 'drop', highWaterMark: 4_096 });
  });
});
