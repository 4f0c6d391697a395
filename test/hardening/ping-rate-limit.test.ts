/**
 * rpc.ping is a request like any other for the rate limit: a flood of them spends the bucket
 * and is answered -32003 once it is empty (it used to be answered before the limit, for free).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

const BURST = 5;
const PINGS = 40;

describe('rpc.ping and the rate limit', () => {
  it('a flood of rpc.ping gets pong while the bucket lasts, then -32003 Rate limited', async () => {
    // A bucket of 5 that refills one token every 1 000 s: nothing refills during the test.
    const { url } = await res.demoGateway({
      heartbeatIntervalMs: 0,
      limits: { ratePerSecond: 0.001, rateBurst: BURST },
    });
    const raw = await openRaw(res, url);
    const ids = Array.from({ length: PINGS }, () => raw.nextId());
    for (const id of ids) raw.send({ jsonrpc: '2.0', method: 'rpc.ping', id });
    const answers = [];
    for (const id of ids) answers.push(await raw.response(id));

    expect(answers.slice(0, BURST)).toEqual(
      ids.slice(0, BURST).map((id) => ({ jsonrpc: '2.0', result: 'pong', id })),
    );
    for (const answer of answers.slice(BURST)) {
      expect(answer).toMatchObject({ jsonrpc: '2.0', error: { code: -32003 } });
      expect(answer.result).toBeUndefined();
    }
    // The bucket is shared with every other call: an ordinary request is refused as well.
    expect(await raw.request('sum', [1, 2])).toMatchObject({ error: { code: -32003 } });
  });

  it('pings in a batch take one token each', async () => {
    const { url } = await res.demoGateway({
      heartbeatIntervalMs: 0,
      limits: { ratePerSecond: 0.001, rateBurst: BURST },
    });
    const raw = await openRaw(res, url);
    const batch = Array.from({ length: 8 }, (_, i) => ({
      jsonrpc: '2.0',
      method: 'rpc.ping',
      id: 100 + i,
    }));
    raw.send(batch);
    await raw.until(() => raw.frames.length > 0, 'the batch reply');
    const reply = raw.frames[0] as unknown as { id: number; result?: string; error?: unknown }[];
    expect(reply.map((r) => r.result ?? 'refused')).toEqual([
      ...Array<string>(BURST).fill('pong'),
      ...Array<string>(8 - BURST).fill('refused'),
    ]);
  });

  it('reserved notifications (rpc.cancel, an unknown rpc.*) take one token each', async () => {
    const { url } = await res.demoGateway({
      heartbeatIntervalMs: 0,
      limits: { ratePerSecond: 0.001, rateBurst: BURST },
    });
    const raw = await openRaw(res, url);
    // Fewer than the bucket: the next request still gets through.
    raw.send({ jsonrpc: '2.0', method: 'rpc.cancel', params: { id: 999 } });
    raw.send({ jsonrpc: '2.0', method: 'rpc.whatever' });
    expect(await raw.request('rpc.ping')).toMatchObject({ result: 'pong' });
    // The bucket's rest, spent by notifications alone: the next request is refused.
    raw.send(
      Array.from({ length: 50 }, () => ({
        jsonrpc: '2.0',
        method: 'rpc.cancel',
        params: { id: 1 },
      })),
    );
    for (let i = 0; i < 50; i++) raw.send({ jsonrpc: '2.0', method: 'rpc.x' });
    expect(await raw.request('rpc.ping')).toMatchObject({ error: { code: -32003 } });
  });
});
