/**
 * A server API broadcast publishes its topics at most MAX_BROADCAST_PUBLISHES at once on the
 * node (every broadcast's together): each publish holds the payload until the broker takes it,
 * so a broadcast of one large message to MAX_BROADCAST_TOPICS topics does not hold a copy for
 * each at once. Every topic is still published, and the reply has each one's seq; when one fails,
 * the topics still waiting are not published and the error names every topic that was.
 */
import { afterEach, expect, it } from 'vitest';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import type { Retention } from '../../src/pubsub/broker.js';
import { MAX_BROADCAST_PUBLISHES } from '../../src/server-api/methods.js';
import { waitFor } from '../support/waiting.js';
import { ApiResources, HeldGate, post } from './support.js';

const res = new ApiResources();
afterEach(() => res.cleanup());

/** A broker whose publishes wait until the test lets them all go. */
class HeldBroker extends MemoryBroker {
  readonly gate = new HeldGate();

  override publish(
    topic: string,
    payload: string,
    retention?: Retention,
    except?: readonly string[],
  ): Promise<number> {
    return this.gate.through(() => super.publish(topic, payload, retention, except));
  }
}

it('server API broadcast publishes stay within MAX_BROADCAST_PUBLISHES on the node', async () => {
  const broker = new HeldBroker();
  const { gateway } = await res.gateway({ broker });
  const api = await res.api(gateway);
  const topics = Array.from({ length: 200 }, (_, i) => `t.${i}`);
  // Two broadcasts at once: the bound is the node's, not each call's.
  const replies = Promise.all([
    post(api.url, 'broadcast', { topics: topics.slice(0, 100), data: 'x'.repeat(1000) }),
    post(api.url, 'broadcast', { topics: topics.slice(100), data: 'x'.repeat(1000) }),
  ]);
  await waitFor(() => broker.gate.running >= MAX_BROADCAST_PUBLISHES, 'publishes to start');
  broker.gate.letGo();
  for (const reply of await replies) {
    const { seqs } = reply.body?.result as { seqs: Record<string, number> };
    expect(Object.values(seqs)).toEqual(Array.from({ length: 100 }, () => 1));
  }
  expect(broker.gate.peak).toBe(MAX_BROADCAST_PUBLISHES);
});

/** Publishes held until the test lets them go, but `failing` refused at once. */
class FailingBroker extends HeldBroker {
  readonly published = new Set<string>();

  constructor(private readonly failing: string) {
    super();
  }

  override async publish(
    topic: string,
    payload: string,
    retention?: Retention,
    except?: readonly string[],
  ): Promise<number> {
    if (topic === this.failing) throw new Error('broker down for this topic');
    const seq = await super.publish(topic, payload, retention, except);
    this.published.add(topic);
    return seq;
  }
}

it('a broadcast one topic of which fails publishes nothing after its reply, which names every topic published', async () => {
  const broker = new FailingBroker('t.0');
  const { gateway } = await res.gateway({ broker });
  const api = await res.api(gateway);
  const topics = Array.from({ length: 100 }, (_, i) => `t.${i}`);
  const reply = post(api.url, 'broadcast', { topics, data: 'x' });
  // t.0 failed at once; the next ones under way are held, the rest wait their turn.
  await waitFor(() => broker.gate.running === MAX_BROADCAST_PUBLISHES - 1, 'publishes to start');
  broker.gate.letGo();
  const { error } = (await reply).body!;
  expect(error?.code).toBe(-32009);
  const { topic, published } = error!.data as { topic: string; published: Record<string, number> };
  expect(topic).toBe('t.0');
  // Another broadcast's publish takes its turn after every turn the first one queued.
  await post(api.url, 'broadcast', { topics: ['after'], data: 'y' });
  expect([...broker.published].filter((t) => t !== 'after').sort()).toEqual(
    Object.keys(published).sort(),
  );
  expect(Object.keys(published)).toHaveLength(MAX_BROADCAST_PUBLISHES - 1);
});

it('a broadcast whose topics wait for their turn makes Node warn of no listener leak', async () => {
  const warnings: string[] = [];
  const onWarning = (warning: Error): void => void warnings.push(warning.name);
  process.on('warning', onWarning);
  try {
    const broker = new HeldBroker();
    const { gateway } = await res.gateway({ broker });
    const api = await res.api(gateway);
    const topics = Array.from({ length: 100 }, (_, i) => `w.${i}`);
    const reply = post(api.url, 'broadcast', { topics, data: 1 });
    await waitFor(() => broker.gate.running >= MAX_BROADCAST_PUBLISHES, 'publishes to start');
    broker.gate.letGo();
    expect((await reply).body?.result).toBeDefined();
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings).not.toContain('MaxListenersExceededWarning');
  } finally {
    process.off('warning', onWarning);
  }
});
