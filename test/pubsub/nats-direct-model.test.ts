/**
 * NatsDirectSubjects' bookkeeping against a model, on real NATS connections: over random
 * sequences of subscribes, unsubscribes, connections closed for good and replaced by new ones
 * (`relink`), unsubscribes while no connection is up, and subscribes racing a replacement, the
 * `$`-topics subscribed on the live connection are exactly those held (subscribed, and not
 * unsubscribed since; a subscribe that rejected holds nothing), each once. Seen from the wire:
 * another connection publishes one probe to every topic, then a sentinel the live connection
 * listens to; the probes it sent before the sentinel are in when the sentinel is.
 */
import fc from 'fast-check';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Link } from '../../src/pubsub/nats-link.js';
import { NatsDirectSubjects } from '../../src/pubsub/nats-direct.js';
import { natsDirectSubject } from '../../src/pubsub/nats-names.js';
import { canConnect } from '../support/network.js';
import { within } from '../support/waiting.js';

const NATS_URL = 'nats://127.0.0.1:4222';
const mustRun = process.env.CI === 'true';
const natsUp = await canConnect(4222);
const TOPICS = ['$a', '$b', '$c'] as const;
type Topic = (typeof TOPICS)[number];

let runs = 0;
let publisher: NatsConnection;

beforeAll(async () => {
  if (natsUp || mustRun) publisher = await connect({ servers: NATS_URL });
});

afterAll(async () => {
  await publisher?.close();
});

interface Model {
  held: Set<Topic>;
}

class Real {
  /** Probe payloads received, by topic. */
  readonly received = new Map<string, string[]>();
  readonly direct: NatsDirectSubjects;
  readonly errors: unknown[] = [];
  link!: Link;
  private sentinelSeen: ((round: string) => void) | undefined;
  private round = 0;

  constructor(readonly prefix: string) {
    // A flush pending on a connection closed under it is never answered: a short bound ends it.
    this.direct = new NatsDirectSubjects(prefix, 300, (err) => this.errors.push(err));
  }

  get sentinel(): string {
    return `${this.prefix}-sentinel`;
  }

  async open(): Promise<void> {
    const nc = await connect({ servers: NATS_URL });
    nc.subscribe(this.sentinel, { callback: (_err, msg) => this.sentinelSeen?.(msg.string()) });
    await nc.flush();
    // Only the connection is used by NatsDirectSubjects.
    this.link = { nc } as Link;
  }

  deliver = (message: { topic: string; payload: string }): void => {
    const list = this.received.get(message.topic) ?? [];
    list.push(message.payload);
    this.received.set(message.topic, list);
  };

  subscribe(topic: Topic): Promise<void> {
    return this.direct.subscribe(this.link, topic, this.deliver);
  }

  /** Close the live connection for good, run `meanwhile`, then relink on a new connection. */
  async replaceConnection(meanwhile: () => unknown = () => undefined): Promise<void> {
    await this.link.nc.close();
    await meanwhile();
    await this.open();
    this.direct.relink(this.link);
    await this.link.nc.flush();
  }

  /** The topics whose probe reached the live connection, with how many times. */
  async probe(): Promise<Map<string, number>> {
    const round = `probe-${++this.round}`;
    this.received.clear();
    const seen = new Promise<void>((resolve) => {
      this.sentinelSeen = (text) => {
        if (text === round) resolve();
      };
    });
    for (const topic of TOPICS) publisher.publish(natsDirectSubject(this.prefix, topic), round);
    publisher.publish(this.sentinel, round);
    await within(seen, `the sentinel ${round}`);
    const counts = new Map<string, number>();
    for (const [topic, payloads] of this.received) {
      counts.set(topic, payloads.filter((p) => p === round).length);
    }
    return counts;
  }

  async close(): Promise<void> {
    await this.link.nc.close();
  }
}

type Command = fc.AsyncCommand<Model, Real>;

async function expectHeldLive(model: Model, real: Real): Promise<void> {
  const counts = await real.probe();
  expect(Object.fromEntries(counts)).toEqual(
    Object.fromEntries([...model.held].sort().map((topic) => [topic, 1])),
  );
}

class Subscribe implements Command {
  constructor(readonly topic: Topic) {}
  check = (): boolean => true;
  async run(model: Model, real: Real): Promise<void> {
    await real.subscribe(this.topic);
    model.held.add(this.topic);
    await expectHeldLive(model, real);
  }
  toString = (): string => `subscribe(${this.topic})`;
}

class Unsubscribe implements Command {
  constructor(readonly topic: Topic) {}
  check = (): boolean => true;
  async run(model: Model, real: Real): Promise<void> {
    expect(real.direct.unsubscribe(this.topic)).toBe(model.held.has(this.topic));
    model.held.delete(this.topic);
    await expectHeldLive(model, real);
  }
  toString = (): string => `unsubscribe(${this.topic})`;
}

/** The connection closed for good; `gone` unsubscribed before the new one is made. */
class ReplaceConnection implements Command {
  constructor(readonly gone: readonly Topic[]) {}
  check = (): boolean => true;
  async run(model: Model, real: Real): Promise<void> {
    await real.replaceConnection(() => {
      for (const topic of this.gone) {
        expect(real.direct.unsubscribe(topic)).toBe(model.held.has(topic));
        model.held.delete(topic);
      }
    });
    await expectHeldLive(model, real);
  }
  toString = (): string => `replace(unsubscribing ${this.gone.join(',') || 'none'})`;
}

/**
 * A subscribe whose round trip is under way when its connection closes for good; it fails
 * (never answered) before the new connection is made, or after, once moved to it.
 */
class SubscribeRacingReplacement implements Command {
  constructor(
    readonly topic: Topic,
    readonly failsFirst: boolean,
  ) {}
  check = (): boolean => true;
  async run(model: Model, real: Real): Promise<void> {
    const subscribed = real.subscribe(this.topic).then(
      () => true,
      () => false,
    );
    await real.replaceConnection(() => (this.failsFirst ? subscribed : undefined));
    // Resolved: held, on the new connection. Rejected: not held, on neither.
    if (await subscribed) model.held.add(this.topic);
    else model.held.delete(this.topic);
    await expectHeldLive(model, real);
  }
  toString = (): string =>
    `subscribe(${this.topic}) racing replace (${this.failsFirst ? 'fails first' : 'moved'})`;
}

const topic = fc.constantFrom(...TOPICS);
const commands = fc.commands(
  [
    topic.map((t) => new Subscribe(t)),
    topic.map((t) => new Unsubscribe(t)),
    fc.uniqueArray(topic, { maxLength: 2 }).map((gone) => new ReplaceConnection(gone)),
    fc.tuple(topic, fc.boolean()).map(([t, first]) => new SubscribeRacingReplacement(t, first)),
  ],
  { maxCommands: 12 },
);

describe.skipIf(!natsUp && !mustRun)('NatsDirectSubjects bookkeeping (model)', () => {
  it('subscribes on the live connection exactly the $-topics it holds, each once', async () => {
    await fc.assert(
      fc.asyncProperty(commands, async (cmds) => {
        const real = new Real(`directmodel${Date.now().toString(36)}x${++runs}`);
        await real.open();
        try {
          await fc.asyncModelRun(() => ({ model: { held: new Set<Topic>() }, real }), cmds);
        } finally {
          await real.close();
        }
      }),
      { numRuns: 40 },
    );
  }, 120_000);
});
