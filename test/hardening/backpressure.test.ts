/**
 * Read-side back-pressure (limits.maxBufferedBytes): a client that keeps sending but stops
 * reading its replies must not make the gateway queue replies without bound. The gateway
 * stops reading from it instead, and carries on, losing nothing, once it reads again.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Gateway, Session } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { waitUntil } from '../support/waiting.js';
import type { WireFrame } from '../support/raw-rpc.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await res.cleanup();
});

const MAX_BUFFERED = 256 * 1024;
const MEMBERS = 100;
/** Batches sent per step before checking whether the gateway stopped reading. */
const STEP = 200;
/** Far more output (each batch is answered with ~7.8 KB) than any loopback socket buffers hold. */
const MAX_BATCHES = 20_000;

/**
 * Batch `k`: one invalid member carrying id `k`, then 99 bare `1`s; every member is answered
 * -32600, the first under id `k`, so the replies' order can be checked.
 */
function batch(k: number): string {
  return `[{"id":${k}}${',1'.repeat(MEMBERS - 1)}]`;
}

/**
 * Watch what the gateway writes to `session` (frames sent, and batch replies sent in pieces): how
 * many frames, the largest, and the most bytes queued.
 */
function watchSends(session: Session) {
  const transport = session.transport;
  const seen = { frames: 0, largestFrame: 0, maxBuffered: 0 };
  const send = transport.send.bind(transport);
  transport.send = (frame) => {
    send(frame);
    seen.frames++;
    if (typeof frame === 'string')
      seen.largestFrame = Math.max(seen.largestFrame, Buffer.byteLength(frame));
    seen.maxBuffered = Math.max(seen.maxBuffered, transport.bufferedAmount);
  };
  // A batch's reply goes in pieces: one frame, counted once written.
  const sendPieces = transport.sendPieces?.bind(transport);
  transport.sendPieces = (source, written) => {
    let bytes = 0;
    sendPieces!(
      {
        next() {
          const piece = source.next();
          if (piece !== undefined) bytes += Buffer.byteLength(piece);
          return piece;
        },
        get made() {
          return source.made;
        },
      },
      () => {
        written?.();
        seen.frames++;
        seen.largestFrame = Math.max(seen.largestFrame, bytes);
        seen.maxBuffered = Math.max(seen.maxBuffered, transport.bufferedAmount);
      },
    );
  };
  return seen;
}

/**
 * Send batches STEP at a time until the gateway has stopped reading, checking after each step
 * that what it holds for the client stays within the limit plus one reply.
 */
async function floodUntilPaused(
  session: Session,
  seen: ReturnType<typeof watchSends>,
  sendBatch: (k: number) => void,
): Promise<number> {
  let sent = 0;
  while (!session.transport.readingPaused) {
    if (sent >= MAX_BATCHES) throw new Error(`the gateway kept reading after ${sent} batches`);
    for (let i = 0; i < STEP; i++) sendBatch(++sent);
    const target = sent;
    await waitUntil(
      () => seen.frames >= target || session.transport.readingPaused === true,
      `the gateway to answer batch ${target} or stop reading`,
    );
    // A reply frame has a header of at most 10 bytes.
    expect(seen.maxBuffered).toBeLessThanOrEqual(MAX_BUFFERED + seen.largestFrame + 10);
  }
  return sent;
}

function expectRepliesInOrder(replies: WireFrame[][], count: number): void {
  expect(replies).toHaveLength(count);
  replies.forEach((reply, i) => {
    expect(reply).toHaveLength(MEMBERS);
    expect(reply[0]!.id).toBe(i + 1);
    expect(reply.every((member) => member.error?.code === -32600)).toBe(true);
  });
}

/** A gateway with a `sum` method (not the demo service: only what these tests need). */
async function sumGateway() {
  const running = await res.gateway({ limits: { maxBufferedBytes: MAX_BUFFERED } });
  running.gateway.method('sum', (params) => (params as number[]).reduce((a, b) => a + b, 0));
  return running;
}

describe('read-side back-pressure (limits.maxBufferedBytes)', () => {
  it('WebSocket: a client that floods batches without reading is stopped at the limit, then served in full once it reads', async () => {
    const { gateway, url } = await sumGateway();
    const before = sessionIds(gateway);
    const raw = await openRaw(res, url);
    const session = newSession(gateway, before);
    const seen = watchSends(session);

    raw.socket.pause(); // the client stops reading; it keeps sending
    const sent = await floodUntilPaused(session, seen, (k) => raw.socket.send(batch(k)));

    expect(seen.frames).toBeLessThan(sent); // the rest waits unread, not answered into memory

    raw.socket.resume();
    await raw.until(() => raw.frames.length >= sent, `${sent} replies`, 60_000);
    expectRepliesInOrder(raw.frames as unknown as WireFrame[][], sent);
    expect(session.transport.readingPaused).toBe(false);
    // Still the same, working connection.
    expect((await raw.request('sum', [1, 2])).result).toBe(3);
    expect(session.isClosed).toBe(false);
  }, 60_000);

  it('TCP: the same for newline-delimited JSON', async () => {
    const { gateway } = await sumGateway();
    const { port } = await gateway.listenTcp(0, '127.0.0.1');
    const before = sessionIds(gateway);
    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    await waitUntil(() => gateway.sessions.size > before.size, 'the TCP session');
    const session = newSession(gateway as Gateway<unknown>, before);
    const seen = watchSends(session);

    socket.pause();
    const sent = await floodUntilPaused(session, seen, (k) => socket.write(`${batch(k)}\n`));
    expect(seen.frames).toBeLessThan(sent);

    let text = '';
    const replies: WireFrame[][] = [];
    socket.setEncoding('utf8');
    const received = waitUntil(() => replies.length >= sent + 1, `${sent} replies`, 60_000);
    socket.on('data', (chunk: string) => {
      text += chunk;
      const lines = text.split('\n');
      text = lines.pop()!;
      for (const line of lines) replies.push(JSON.parse(line) as WireFrame[]);
      if (replies.length === sent)
        socket.write('{"jsonrpc":"2.0","method":"sum","params":[1,2],"id":"last"}\n');
    });
    socket.resume();
    await received;
    expectRepliesInOrder(replies.slice(0, sent), sent);
    expect(replies[sent]).toEqual({ jsonrpc: '2.0', result: 3, id: 'last' });
    expect(session.transport.readingPaused).toBe(false);
  }, 60_000);
});
