/**
 * What `history` calls hold while their replies wait is bounded (MAX_HISTORY_HELD_BYTES): a
 * batch's reply waits for all its members, and its own bound (MAX_BATCH_REPLY_CHARS) applies
 * only once every member is answered. A batch of a hundred calls of a few bytes each had the
 * gateway read, parse and hold a hundred pages of up to 4 MiB, then throw most of them away as
 * "Reply too large"; several connections of one address, each with such a batch, held gigabytes.
 * Past the bound a call is answered -32603 before the broker is read for it.
 *
 * The rule against its model (HeldHistory, any sizes), then a real gateway: one batch over a
 * WebSocket and over POST, two connections of one address, and members a batch dropped.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_BATCH_REPLY_CHARS } from '../../src/peer/replies.js';
import type { History } from '../../src/pubsub/broker.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import {
  EventLoopTurns,
  HeldHistory,
  HeldHistoryRefusal,
  HistoryHeldByAddress,
  MAX_HISTORY_HELD_BYTES,
  MAX_HISTORY_PAGE_BYTES,
} from '../../src/server/pubsub-history.js';
import { RawRpc } from '../support/raw-rpc.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** A MemoryBroker that counts the history reads asked of it. */
class CountingBroker extends MemoryBroker {
  reads = 0;
  override history(topic: string, afterSeq: number, limit?: number): Promise<History> {
    this.reads++;
    return super.history(topic, afterSeq, limit);
  }
}

/** The error a batch member gets when its connection's pages would pass the bound. */
const tooLarge = {
  code: -32603,
  message: 'Reply too large',
  data: { reason: 'batch reply too large', maxBatchReplyChars: MAX_BATCH_REPLY_CHARS },
};

/** The same, when its address group's connections hold the bound between them. */
const addressFull = {
  code: -32603,
  message: 'Reply too large',
  data: { reason: 'history held for this address', maxHistoryHeldBytes: MAX_HISTORY_HELD_BYTES },
};

/** Each message's payload (its JSON, quotes included), in bytes: four make a page. */
const MESSAGE_BYTES = 1_000_000;
const PAGE_MESSAGES = 4;
const PAGE_BYTES = PAGE_MESSAGES * MESSAGE_BYTES;
/** Distinct pages the topic holds (since 0 to 15). */
const PAGES = 16;

/**
 * How many such pages a connection holds before it refuses: a call is read while a whole page
 * more (MAX_HISTORY_PAGE_BYTES) fits in what a batch's reply holds (MAX_HISTORY_HELD_BYTES is
 * MAX_BATCH_REPLY_CHARS).
 */
const HELD_PAGES = Math.floor((MAX_BATCH_REPLY_CHARS - MAX_HISTORY_PAGE_BYTES) / PAGE_BYTES) + 1;

interface Member {
  id: number | string;
  result?: { messages: { seq: number; data: string }[] };
  error?: unknown;
}

async function start() {
  const broker = new CountingBroker();
  const running = await res.gateway({ broker });
  running.gateway.topic('big', { history: { maxLength: 1_000 } });
  const payload = 'x'.repeat(MESSAGE_BYTES - 2);
  for (let i = 0; i < PAGES + PAGE_MESSAGES; i++) await running.gateway.publish('big', payload);
  return { broker, ...running };
}

/** `count` history calls, each a page of its own (ids 0 to count - 1). */
function historyCalls(count: number): object[] {
  return Array.from({ length: count }, (_, k) => ({
    jsonrpc: '2.0',
    id: k,
    method: 'topic.history',
    params: { topic: 'big', since: k % PAGES, limit: PAGE_MESSAGES },
  }));
}

async function open(url: string): Promise<RawRpc> {
  const raw = await RawRpc.open(url);
  res.track(raw.socket);
  return raw;
}

/** The next batch reply `raw` receives (the frames are kept in order; a batch's is an array). */
async function batchReply(raw: RawRpc, nth: number): Promise<Member[]> {
  const replies = () => raw.frames.filter((f) => Array.isArray(f)) as unknown as Member[][];
  await raw.until(() => replies().length >= nth, `batch reply ${nth}`, 60_000);
  return replies()[nth - 1]!;
}

/** The history members of `reply`: each a whole page of its own (since id % PAGES), or refused. */
function pagesOf(reply: Member[], refusal: unknown): Member[] {
  const answered = reply.filter((m) => typeof m.id === 'number' && m.result !== undefined);
  for (const member of answered) {
    const since = (member.id as number) % PAGES;
    expect(member.result!.messages.map((m) => m.seq)).toEqual(
      Array.from({ length: PAGE_MESSAGES }, (_, i) => since + i + 1),
    );
  }
  for (const member of reply.filter((m) => typeof m.id === 'number' && m.result === undefined)) {
    expect(member.error).toEqual(refusal);
  }
  return answered;
}

describe('HeldHistory, against its model', () => {
  it('takes a page only while the connection and its address stay within the bound (or hold nothing); releases give back what was taken, once, and nothing after a clear', () => {
    const MAX = MAX_HISTORY_HELD_BYTES;
    expect(MAX).toBe(MAX_BATCH_REPLY_CHARS);
    const page = fc.integer({ min: 0, max: 2 * MAX_HISTORY_PAGE_BYTES });
    const step = fc.oneof(
      fc.record({ kind: fc.constant('take' as const), conn: fc.nat(3), bytes: page }),
      fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }),
      fc.record({ kind: fc.constant('clear' as const), conn: fc.nat(3) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 80 }), (steps) => {
        const addresses = new HistoryHeldByAddress();
        // Connections 0 to 2 share one address group; 3 is a pipe (no group).
        const groups = ['a', 'a', 'a', undefined];
        const conns = groups.map((g) => new HeldHistory(addresses, g));
        const model = groups.map(() => ({ bytes: 0, generation: 0 }));
        const holds: {
          conn: number;
          bytes: number;
          generation: number;
          release: () => void;
        }[] = [];
        const address = () => model.slice(0, 3).reduce((n, m) => n + m.bytes, 0);
        for (const s of steps) {
          if (s.kind === 'take') {
            const own = model[s.conn]!;
            const shared = groups[s.conn] === undefined ? 0 : address();
            const room = (bytes: number) =>
              (own.bytes === 0 || own.bytes + bytes <= MAX) &&
              (shared === 0 || shared + bytes <= MAX);
            const hold = conns[s.conn]!.forCall();
            let refused = false;
            try {
              hold.checkRoom();
              hold.take(s.bytes);
            } catch (err) {
              expect(err).toBeInstanceOf(HeldHistoryRefusal);
              refused = true;
            }
            expect(refused).toBe(!(room(MAX_HISTORY_PAGE_BYTES) && room(s.bytes)));
            if (!refused) {
              own.bytes += s.bytes;
              const { generation } = own;
              holds.push({ conn: s.conn, bytes: s.bytes, generation, release: hold.release });
            }
          } else if (s.kind === 'release' && holds.length > 0) {
            const [held] = holds.splice(s.pick % holds.length, 1);
            held!.release();
            held!.release(); // a second release gives nothing back
            const own = model[held!.conn]!;
            if (held!.generation === own.generation) own.bytes -= held!.bytes;
          } else if (s.kind === 'clear') {
            conns[s.conn]!.clear();
            model[s.conn] = { bytes: 0, generation: model[s.conn]!.generation + 1 };
          }
          conns.forEach((conn, i) => expect(conn.bytes).toBe(model[i]!.bytes));
          expect(addresses.bytesOf('a')).toBe(address());
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('EventLoopTurns: where a page is parsed', () => {
  it('resolves each turn asked for in a turn of the event loop of its own, in the order asked', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 30 }), async (count) => {
        const turns = new EventLoopTurns();
        // A ticker that counts the loop's turns: it runs once in each.
        let loopTurn = 0;
        let ticking = true;
        const tick = (): void => {
          loopTurn++;
          if (ticking) setImmediate(tick);
        };
        setImmediate(tick);
        const seen: { asked: number; loopTurn: number }[] = [];
        await Promise.all(
          Array.from({ length: count }, (_, asked) =>
            turns.next().then(() => seen.push({ asked, loopTurn })),
          ),
        );
        ticking = false;
        expect(seen.map((s) => s.asked)).toEqual(Array.from({ length: count }, (_, i) => i));
        for (let i = 1; i < seen.length; i++) {
          expect(seen[i]!.loopTurn).toBeGreaterThan(seen[i - 1]!.loopTurn);
        }
      }),
      { numRuns: 30 },
    );
  });
});

describe('history calls in a batch', () => {
  it('over a WebSocket: pages are read while the reply can hold them; the rest are answered -32603 unread, and the connection reads on', async () => {
    const { broker, url } = await start();
    const raw = await open(url);
    raw.send(JSON.stringify(historyCalls(100)));
    const reply = await batchReply(raw, 1);
    expect(reply.map((m) => m.id)).toEqual(Array.from({ length: 100 }, (_, k) => k));
    const answered = pagesOf(reply, tooLarge);
    expect(answered).toHaveLength(HELD_PAGES);
    // Read: the pages answered, and at most one more a read slot (refused once read).
    expect(broker.reads).toBeLessThanOrEqual(HELD_PAGES + 2);
    // What the batch held is let go with its reply.
    const lone = await raw.request('topic.history', { topic: 'big', since: 0, limit: 1 });
    expect((lone.result as { messages: unknown[] }).messages).toHaveLength(1);
  }, 60_000);

  it('over POST: the same', async () => {
    const { broker, httpUrl } = await start();
    const response = await fetch(`${httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(historyCalls(100)),
    });
    expect(response.status).toBe(200);
    const answered = pagesOf((await response.json()) as Member[], tooLarge);
    expect(answered).toHaveLength(HELD_PAGES);
    expect(broker.reads).toBeLessThanOrEqual(HELD_PAGES + 2);
  }, 60_000);

  it("an address's connections hold the bound between them: a second connection's batch is refused unread while the first's reply waits, and read once it has gone", async () => {
    const { broker, gateway, url } = await start();
    let openGate: () => void = () => undefined;
    const gate = new Promise<string>((resolve) => (openGate = () => resolve('open')));
    gateway.method('gate', () => gate);
    const first = await open(url);
    const second = await open(url);
    // The first's reply waits for `gate`: its pages stay held meanwhile.
    first.send(
      JSON.stringify([{ jsonrpc: '2.0', id: 'gate', method: 'gate' }, ...historyCalls(20)]),
    );
    // Its history calls all answered, the gate alone runs.
    const gateAlone = () => [...gateway.sessions.values()].some((s) => s.peer.inFlightCount === 1);
    await waitUntil(gateAlone, "the first batch's history calls answered");
    const readBefore = broker.reads;
    second.send(JSON.stringify(historyCalls(20)));
    const refused = await batchReply(second, 1);
    expect(refused.filter((m) => m.result !== undefined)).toEqual([]);
    expect(pagesOf(refused, addressFull)).toHaveLength(0);
    expect(broker.reads).toBe(readBefore);

    openGate();
    const firstReply = await batchReply(first, 1);
    expect(firstReply[0]).toMatchObject({ id: 'gate', result: 'open' });
    expect(pagesOf(firstReply.slice(1), tooLarge)).toHaveLength(HELD_PAGES);
    second.send(JSON.stringify(historyCalls(20)));
    expect(pagesOf(await batchReply(second, 2), tooLarge)).toHaveLength(HELD_PAGES);
  }, 60_000);

  it('pages of members the batch dropped for its own bound do not count against what the connection reads later', async () => {
    const { broker, gateway, url } = await start();
    // A result that leaves the batch's reply no room for a page.
    const big = 'y'.repeat(MAX_BATCH_REPLY_CHARS - PAGE_BYTES / 2);
    gateway.method('big', () => Promise.resolve(big));
    const raw = await open(url);
    raw.send(JSON.stringify([{ jsonrpc: '2.0', id: 'big', method: 'big' }, ...historyCalls(4)]));
    const dropped = await batchReply(raw, 1);
    expect(dropped[0]).toMatchObject({ id: 'big' });
    expect(dropped.slice(1).map((m) => m.error)).toEqual([tooLarge, tooLarge, tooLarge, tooLarge]);

    const readBefore = broker.reads;
    raw.send(JSON.stringify(historyCalls(100)));
    expect(pagesOf(await batchReply(raw, 2), tooLarge)).toHaveLength(HELD_PAGES);
    expect(broker.reads - readBefore).toBeLessThanOrEqual(HELD_PAGES + 2);
  }, 60_000);
});
