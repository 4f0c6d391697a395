import { afterEach, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const SUBSCRIBERS = 1_000;
const BATCH = 100;
const MESSAGES = 50;

describe('fan-out', () => {
  it(`delivers every one of ${MESSAGES} messages, in order and nothing else, to ${SUBSCRIBERS} subscribers`, async () => {
    const { gateway, url } = await res.gateway({
      limits: { maxConnectionsPerIp: SUBSCRIBERS, connectionsPerSecondPerIp: 0 },
    });
    gateway.topic('fan');

    // Connect in batches so the listener's accept queue is never flooded.
    const subscribers: RawRpc[] = [];
    while (subscribers.length < SUBSCRIBERS) {
      const batch = await Promise.all(Array.from({ length: BATCH }, () => RawRpc.open(url)));
      for (const raw of batch) res.track(raw.socket);
      subscribers.push(...batch);
    }
    expect(gateway.sessions.size).toBe(SUBSCRIBERS);

    const replies = await Promise.all(subscribers.map((raw) => raw.request('subscribe', ['fan'])));
    const ids = replies.map((reply) => reply.result as unknown);
    for (const id of ids) expect(id).toMatch(/^0x[0-9a-f]+$/);
    // Ids are unique per connection; across connections a topic shares one, so one encoded
    // frame serves every subscriber (README: Fan-out).
    expect(new Set(ids).size).toBe(1);
    expect(gateway.pubsub.topics()).toEqual({ fan: SUBSCRIBERS });

    const published: { n: number; text: string }[] = [];
    for (let n = 0; n < MESSAGES; n++) {
      const data = { n, text: `message ${n}` };
      published.push(data);
      expect(await gateway.publish('fan', data)).toBe(n + 1);
    }

    await Promise.all(
      subscribers.map((raw) =>
        raw.until(() => raw.notifications().length >= MESSAGES, `${MESSAGES} notifications`),
      ),
    );
    // Anything written after the messages but before the pong would be seen now.
    await Promise.all(subscribers.map((raw) => raw.barrier()));

    const problems: string[] = [];
    subscribers.forEach((raw, k) => {
      const expected = [
        { jsonrpc: '2.0', result: ids[k], id: 1 },
        ...published.map((data, i) => ({
          jsonrpc: '2.0',
          method: 'subscription',
          params: { subscription: ids[k], seq: i + 1, result: data },
        })),
        { jsonrpc: '2.0', result: 'pong', id: 2 },
      ];
      try {
        expect(raw.frames).toEqual(expected);
      } catch {
        problems.push(`subscriber ${k}: ${JSON.stringify(raw.frames).slice(0, 300)}`);
      }
    });
    expect(problems).toEqual([]);

    await Promise.all(subscribers.map((raw) => raw.close()));
    await waitUntil(
      () => gateway.sessions.size === 0 && Object.keys(gateway.pubsub.topics()).length === 0,
      'every session to close and the topic to be released',
      15_000,
    );
    expect(gateway.pubsub.topics()).toEqual({});
  }, 60_000);
});
