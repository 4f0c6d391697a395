import { describe, expect, it } from 'vitest';
import { Delivery } from '../../src/pubsub/delivery.js';
import { notificationHead } from '../../src/pubsub/frames.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import type { Sink } from '../../src/pubsub/sink.js';
import { TopicRegistry } from '../../src/pubsub/topic-registry.js';
import { flushAfterTask } from '../../src/transport/turn-coalescer.js';
import type { EncodedFrame } from '../../src/transport/transport.js';

/*
 * When each subscriber's socket writes what a publish sends it. A socket gathers what it is
 * sent in a turn and writes it once (turn-coalescer), as WsTransport does. A fan-out hands each
 * subscriber all of the turn's messages and has its socket write them before it serves the
 * next subscriber: the first subscriber's bytes leave while the others are being served (a
 * paced message reaches the last of many subscribers as soon as a plain loop of sends would),
 * and a burst still costs each socket one write.
 */

const head = notificationHead('subscription');

/** A socket that gathers its frames until the coalescer flushes it, as WsTransport does. */
class GatheringSink implements Sink {
  readonly bufferedAmount = 0;
  private gathered: number[] = [];

  constructor(
    private readonly name: string,
    private readonly log: string[],
  ) {}

  send(frame: string | EncodedFrame): void {
    const text = typeof frame === 'string' ? frame : new TextDecoder().decode(frame.bytes);
    const seq = (JSON.parse(text) as { params: { seq: number } }).params.seq;
    this.log.push(`send ${this.name} ${seq}`);
    if (this.gathered.push(seq) === 1) flushAfterTask(this);
  }

  flushWrites(): void {
    if (this.gathered.length === 0) return;
    this.log.push(`write ${this.name} [${this.gathered.join(',')}]`);
    this.gathered = [];
  }

  close(): void {}

  onDrain(): () => void {
    return () => undefined;
  }
}

async function subscribers(names: string[]) {
  const broker = new MemoryBroker();
  const registry = new TopicRegistry(
    broker,
    head,
    () => '0x1',
    () => undefined,
  );
  await registry.hold('news');
  const log: string[] = [];
  for (const name of names) {
    const delivery = new Delivery(
      new GatheringSink(name, log),
      head,
      JSON.stringify(registry.sharedId('news')),
      { slowConsumer: 'drop', highWaterMark: 1 << 20 },
    );
    registry.attach('news', delivery);
  }
  return { broker, log };
}

function turnsEnd(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

describe('fan-out writes', () => {
  it('a single message: each socket writes it before the next subscriber is sent it', async () => {
    const { broker, log } = await subscribers(['a', 'b', 'c']);
    await broker.publish('news', '1');
    await turnsEnd();
    expect(log).toEqual([
      'send a 1',
      'write a [1]',
      'send b 1',
      'write b [1]',
      'send c 1',
      'write c [1]',
    ]);
    await broker.close();
  });

  it('a burst in one turn: each socket writes all of it at once, in order', async () => {
    const { broker, log } = await subscribers(['a', 'b']);
    for (let i = 1; i <= 3; i++) void broker.publish('news', String(i));
    await turnsEnd();
    expect(log).toEqual([
      'send a 1',
      'send a 2',
      'send a 3',
      'write a [1,2,3]',
      'send b 1',
      'send b 2',
      'send b 3',
      'write b [1,2,3]',
    ]);
    await broker.close();
  });

  it('messages of later turns are written in later writes', async () => {
    const { broker, log } = await subscribers(['a']);
    void broker.publish('news', '1');
    await turnsEnd();
    void broker.publish('news', '2');
    void broker.publish('news', '3');
    await turnsEnd();
    expect(log.filter((entry) => entry.startsWith('write'))).toEqual([
      'write a [1]',
      'write a [2,3]',
    ]);
    await broker.close();
  });
});
