/**
 * `keep-latest` with a high-water mark smaller than Node's own (16 KiB): the message held
 * while the socket was above the mark must be sent once its buffer empties, even though
 * Node emits no 'drain' for a backlog that small.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RawRpc } from '../support/raw-rpc.js';
import { waitUntil } from '../support/waiting.js';
import type { SubscriptionParams } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await res.cleanup();
});

const COUNT = 50;
const pad = 'x'.repeat(1024);

describe("keep-latest with a small highWaterMark (below Node's 16 KiB)", () => {
  it('WebSocket: the last message of a burst reaches a reading subscriber without another publish', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('burst', { slowConsumer: 'keep-latest', highWaterMark: 512 });
    const raw = await RawRpc.open(url);
    res.track(raw.socket);
    const id = (await raw.request('subscribe', ['burst'])).result as string;

    // One burst, in one turn: the first goes out, the rest replace each other while held.
    for (let i = 1; i <= COUNT; i++) void gateway.publish('burst', { i, pad });

    await raw.until(
      () => raw.notifications(id).some((m) => m.seq === COUNT),
      `seq ${COUNT} (the held message)`,
    );
    const seqs = raw.notifications(id).map((m) => m.seq);
    expect(seqs.at(-1)).toBe(COUNT);
    const last = raw.notifications(id).at(-1)!;
    expect((last.result as { i: number }).i).toBe(COUNT);
    // Whatever was skipped is reported as missed: every seq is accounted for.
    let previous = 0;
    for (const m of raw.notifications(id)) {
      expect(m.seq! - previous - 1).toBe(m.missed ?? 0);
      previous = m.seq!;
    }
  });

  it('TCP: the same over newline-delimited JSON', async () => {
    const { gateway } = await res.gateway();
    gateway.topic('burst', { slowConsumer: 'keep-latest', highWaterMark: 512 });
    const { port } = await gateway.listenTcp(0, '127.0.0.1');
    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    const frames: { id?: unknown; result?: unknown; params?: SubscriptionParams }[] = [];
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
      const lines = text.split('\n');
      text = lines.pop()!;
      for (const line of lines) frames.push(JSON.parse(line) as (typeof frames)[number]);
    });
    socket.write('{"jsonrpc":"2.0","method":"subscribe","params":["burst"],"id":1}\n');
    await waitUntil(() => frames.some((f) => f.id === 1), 'the subscribe reply');

    for (let i = 1; i <= COUNT; i++) void gateway.publish('burst', { i, pad });

    const messages = () => frames.filter((f) => f.params !== undefined).map((f) => f.params!);
    await waitUntil(
      () => messages().some((m) => m.seq === COUNT),
      `seq ${COUNT} (the held message)`,
    );
    expect(messages().at(-1)!.seq).toBe(COUNT);
  });
});
