import { afterEach, describe, expect, it } from 'vitest';
import { MAX_EXCEPT } from '../../src/pubsub/broker.js';
import type { Gateway } from '../../src/server/gateway.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { RawRpc } from '../support/raw-rpc.js';
import { post, startApi } from '../server-api/support.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** A raw client subscribed to `topic` (with its position, so a hole would show as a gap signal). */
async function member(gateway: Gateway<unknown>, url: string, topic: string) {
  const before = sessionIds(gateway);
  const raw = await RawRpc.open(url);
  res.track(raw.socket);
  const session = newSession(gateway, before);
  const reply = await raw.request('subscribe', [topic, null, { position: true }]);
  const id = reply.result as string;
  await raw.until(() => raw.notifications(id).length >= 1, 'the position');
  return { raw, id, sessionId: session.id };
}

/** The data of every message notification `raw` got for `id`, with nothing else in between. */
function messages(raw: RawRpc, id: string): unknown[] {
  return raw
    .notifications(id)
    .filter((n) => n.seq !== undefined && 'result' in n)
    .map((n) => n.result);
}

describe('publish except', () => {
  it('reaches every subscriber but the excepted session, which sees no hole afterwards', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('chat.*');
    const [a, b, c] = [
      await member(gateway, url, 'chat.lobby'),
      await member(gateway, url, 'chat.lobby'),
      await member(gateway, url, 'chat.lobby'),
    ];

    expect(await gateway.publish('chat.lobby', { from: 'a' }, { except: a.sessionId })).toBe(1);
    expect(await gateway.publish('chat.lobby', { from: 'server' })).toBe(2);
    for (const m of [a, b, c]) {
      await m.raw.until(() => messages(m.raw, m.id).length >= (m === a ? 1 : 2), 'the messages');
      await m.raw.barrier();
    }

    expect(messages(a.raw, a.id)).toEqual([{ from: 'server' }]);
    expect(messages(b.raw, b.id)).toEqual([{ from: 'a' }, { from: 'server' }]);
    expect(messages(c.raw, c.id)).toEqual([{ from: 'a' }, { from: 'server' }]);
    // The passed-by message is accounted for: no gap signal, nothing counted as missed.
    const aNotes = a.raw.notifications(a.id);
    expect(aNotes.filter((n) => n.gap !== undefined || n.missed !== undefined)).toEqual([]);
    expect(aNotes.at(-1)).toMatchObject({ seq: 2, result: { from: 'server' } });
  });

  it('leaves out every session of a list; an empty list leaves out nobody', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('room');
    const members: Awaited<ReturnType<typeof member>>[] = [];
    for (let i = 0; i < 4; i++) members.push(await member(gateway, url, 'room'));
    const [a, b, c, d] = members as [
      (typeof members)[0],
      (typeof members)[0],
      (typeof members)[0],
      (typeof members)[0],
    ];

    await gateway.publish('room', 'not for a or c', { except: [a.sessionId, c.sessionId] });
    await gateway.publish('room', 'for all', { except: [] });
    for (const m of members) {
      await m.raw.until(() => messages(m.raw, m.id).at(-1) === 'for all', 'the last message');
      await m.raw.barrier();
    }
    expect(messages(a.raw, a.id)).toEqual(['for all']);
    expect(messages(b.raw, b.id)).toEqual(['not for a or c', 'for all']);
    expect(messages(c.raw, c.id)).toEqual(['for all']);
    expect(messages(d.raw, d.id)).toEqual(['not for a or c', 'for all']);
  });

  it('keeps the message in history for everyone: a resume replays it to the excepted session too', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    const a = await member(gateway, url, 'news');
    await gateway.publish('news', 'first', { except: a.sessionId });
    const again = await RawRpc.open(url);
    res.track(again.socket);
    const id = (await again.request('subscribe', ['news', null, { since: 0 }])).result as string;
    await again.until(() => messages(again, id).length >= 1, 'the replay');
    expect(messages(again, id)).toEqual(['first']);
  });

  it('a resume on the excepted session itself passes it by in the replay too (memory broker)', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('news');
    const a = await member(gateway, url, 'news');
    await gateway.publish('news', 'not for a', { except: a.sessionId });
    await gateway.publish('news', 'for all');
    // The same session subscribes again from the start: history holds both, the first naming it.
    const id = (await a.raw.request('subscribe', ['news', null, { since: 0 }])).result as string;
    await a.raw.until(() => messages(a.raw, id).length >= 1, 'the replay');
    expect(messages(a.raw, id)).toEqual(['for all']);
    const frames = a.raw.notifications(id);
    expect(frames.filter((n) => 'gap' in n)).toEqual([]);
    expect(frames.at(-1)).toMatchObject({ seq: 2, result: 'for all' });
  });

  it('a latest-value subscriber on the excepted session passes the last message by, as live', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('doc', { latestValue: true });
    const before = sessionIds(gateway);
    const a = await RawRpc.open(url);
    res.track(a.socket);
    const session = newSession(gateway, before);
    await gateway.publish('doc', 'for all');
    await gateway.publish('doc', 'not for a', { except: session.id });
    const id = (await a.request('subscribe', ['doc'])).result as string;
    // Another session gets it first, as any subscriber does.
    const other = await RawRpc.open(url);
    res.track(other.socket);
    const otherId = (await other.request('subscribe', ['doc'])).result as string;
    await other.until(() => messages(other, otherId).length >= 1, 'the latest value');
    await gateway.publish('doc', 'next');
    await a.until(() => messages(a, id).length >= 1, 'the live message');
    await a.barrier();
    expect(messages(a, id)).toEqual(['next']);
    expect(a.notifications(id).filter((n) => 'missed' in n || 'gap' in n)).toEqual([]);
    expect(messages(other, otherId)[0]).toBe('not for a');
  });

  it(`refuses more than ${MAX_EXCEPT} session ids with a RangeError, publishing nothing`, async () => {
    const { gateway } = await res.gateway();
    gateway.topic('big');
    const ids = Array.from({ length: MAX_EXCEPT + 1 }, (_, i) => `s${i}`);
    await expect(gateway.publish('big', 1, { except: ids })).rejects.toThrow(RangeError);
    await expect(gateway.publish('big', 1, { except: ids })).rejects.toThrow(
      `except: ${MAX_EXCEPT + 1} session ids, at most ${MAX_EXCEPT}`,
    );
    expect(await gateway.publish('big', 1, { except: ids.slice(0, MAX_EXCEPT) })).toBe(1);
    await expect(gateway.publish('big', 1, { except: [42 as unknown as string] })).rejects.toThrow(
      TypeError,
    );
  });

  it('takes except through the server API publish and broadcast', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('t.*');
    const api = await startApi(gateway);
    res.gateways.push({ close: () => api.close() });
    const a = await member(gateway, url, 't.one');
    const b = await member(gateway, url, 't.one');
    const c = await member(gateway, url, 't.two');

    expect(
      (await post(api.url, 'publish', { topic: 't.one', data: 'p', except: [b.sessionId] })).body,
    ).toMatchObject({ result: { seq: 1 } });
    const broadcast = await post(api.url, 'broadcast', {
      topics: ['t.one', 't.two'],
      data: 'bc',
      except: [a.sessionId, c.sessionId],
    });
    expect(broadcast.body).toMatchObject({ result: { seqs: { 't.one': 2, 't.two': 1 } } });
    await post(api.url, 'broadcast', { topics: ['t.one', 't.two'], data: 'end' });
    for (const m of [a, b, c]) {
      await m.raw.until(() => messages(m.raw, m.id).at(-1) === 'end', 'the last message');
    }
    expect(messages(a.raw, a.id)).toEqual(['p', 'end']);
    expect(messages(b.raw, b.id)).toEqual(['bc', 'end']);
    expect(messages(c.raw, c.id)).toEqual(['end']);

    const refused = await post(api.url, 'publish', { topic: 't.one', data: 1, except: 'x' });
    expect(refused.body?.error).toMatchObject({ code: -32602, data: { field: 'except' } });
    const tooMany = Array.from({ length: MAX_EXCEPT + 1 }, (_, i) => `s${i}`);
    const over = await post(api.url, 'broadcast', { topics: ['t.one'], data: 1, except: tooMany });
    expect(over.body?.error).toMatchObject({ code: -32602, data: { field: 'except' } });
  });
});
