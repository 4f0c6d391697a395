/**
 * Gateways in this process that share a real broker for presence, and what the presence tests
 * do on them: a node with `room.*` declared with presence, a raw session subscribed to a topic,
 * and the store's members read page by page. Each helper pushes what it opens onto `cleanups`,
 * which the test's afterEach runs in reverse.
 */
import { expect } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import type { PresenceMember } from '../../src/pubsub/presence.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { NATS_URL, REDIS_URL } from './brokers.js';
import type { BrokerKind } from './brokers.js';
import { startGateway } from './gateway.js';
import { RawRpc } from './raw-rpc.js';

export type Cleanups = (() => unknown)[];

export interface PresenceNode {
  gateway: Gateway;
  url: string;
  broker: Broker;
}

/** A gateway on `kind` under `prefix`, with `room.*` declared with presence. */
export async function presenceNode(
  kind: BrokerKind,
  prefix: string,
  cleanups: Cleanups,
  options: GatewayOptions<unknown> = {},
): Promise<PresenceNode> {
  const broker =
    kind === 'redis'
      ? await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` })
      : await NatsBroker.connect({ servers: NATS_URL, prefix });
  const { gateway, url } = await startGateway({ broker, presenceCoalesceMs: 50, ...options });
  gateway.topic('room.*', { presence: true });
  cleanups.push(async () => {
    await gateway.close();
    await broker.close().catch(() => undefined);
  });
  return { gateway, url, broker };
}

/** A raw session on `url` subscribed to `topic`; its subscription id. */
export async function presenceMember(
  url: string,
  topic: string,
  cleanups: Cleanups,
): Promise<{ raw: RawRpc; id: string }> {
  const raw = await RawRpc.open(url);
  cleanups.push(() => raw.close());
  return { raw, id: await subscribeTo(raw, topic) };
}

/** Subscribe `raw` to `topic`; the subscription id. */
export async function subscribeTo(raw: RawRpc, topic: string): Promise<string> {
  const reply = await raw.request('subscribe', [topic]);
  expect(typeof reply.result).toBe('string');
  return reply.result as string;
}

/** Every member of `topic` in the store, read a page of 7 at a time. */
export async function storedMembers(gateway: Gateway, topic: string): Promise<PresenceMember[]> {
  const members: PresenceMember[] = [];
  let cursor: string | undefined;
  do {
    const page = await gateway.presence(topic).members({ cursor, limit: 7 });
    members.push(...page.members);
    cursor = page.cursor;
  } while (cursor !== undefined);
  return members;
}
