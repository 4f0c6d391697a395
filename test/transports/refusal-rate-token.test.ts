/**
 * A message the transport refuses itself, before any session sees it (bytes that are not UTF-8:
 * an NDJSON line over TCP, a POST to an HTTP streaming session), costs the session's rate limit
 * (limits.ratePerSecond, rateBurst) a token, as a message the session answers does (a syntax
 * error takes one too). Otherwise a client could send such messages without end, never rate
 * limited, while its calls are. Checked by counting the calls answered before the limit refuses
 * them (-32003), with a rate that does not refill within the test.
 */
import { request } from 'node:http';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/index.js';
import { startGateway } from '../support/gateway.js';
import { within } from '../support/waiting.js';
import { exchange, openStream, sessionHeaders } from '../sse/sse-raw.js';

const INVALID_UTF8 =
  '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error","data":{"reason":"invalid UTF-8"}},"id":null}';

/** A token a second and then some: the bucket does not refill while a test runs. */
const RATE = 0.001;
const BURST = 4;

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A call's bytes, or a message whose bytes are not UTF-8 (the call with 0xff in its params). */
function messageBytes(id: number, valid: boolean): Buffer {
  const call = `{"jsonrpc":"2.0","id":${id},"method":"echo","params":["a`;
  return Buffer.concat([Buffer.from(call), Buffer.from(valid ? [] : [0xff]), Buffer.from('"]}')]);
}

/** One session of a transport: messages sent in order, the answers collected as they come. */
interface Channel {
  send(message: Buffer): Promise<void>;
  answers(): string[];
  /** Resolves once `count` answers in all have come. */
  until(count: number): Promise<void>;
  close(): Promise<void>;
}

/** A TCP connection to `port` (NDJSON). */
async function tcpChannel(port: number): Promise<Channel> {
  const socket: Socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  const answers: string[] = [];
  const waiters = new Set<() => void>();
  let rest = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    const parts = (rest + chunk).split('\n');
    rest = parts.pop()!;
    answers.push(...parts.filter((line) => line !== ''));
    for (const wake of waiters) wake();
  });
  socket.on('close', () => {
    for (const wake of waiters) wake();
  });
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return {
    answers: () => answers,
    send: (message) =>
      new Promise((resolve) =>
        socket.write(Buffer.concat([message, Buffer.from('\n')]), () => resolve()),
      ),
    async until(count) {
      while (answers.length < count) {
        if (socket.destroyed) throw new Error(`closed after ${JSON.stringify(answers)}`);
        await within(new Promise<void>((wake) => waiters.add(wake)), `answer ${count}`);
      }
    },
    close: () => {
      socket.destroy();
      return Promise.resolve();
    },
  };
}

/** An HTTP streaming session at `events`: each message POSTed, the answers read off the stream. */
async function sseChannel(events: string): Promise<Channel> {
  const stream = await openStream(events);
  const messages = (): string[] =>
    stream.events.filter((event) => event.event === 'message').map((event) => event.data);
  const post = (body: Buffer): Promise<number> =>
    new Promise((resolve, reject) => {
      const req = request(
        events,
        { method: 'POST', headers: sessionHeaders(stream.session) },
        (response) => {
          response.resume();
          response.on('end', () => resolve(response.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  return {
    answers: messages,
    async send(message) {
      // Sent one after the other: the gateway takes each body's token as it answers 202.
      expect(await post(message)).toBe(202);
    },
    async until(count) {
      await stream.until(() => messages().length >= count);
    },
    close: async () => {
      await exchange(events, 'DELETE', sessionHeaders(stream.session));
      stream.destroy();
    },
  };
}

interface Transport {
  open(): Promise<Channel>;
}

async function gatewayWithTransports(): Promise<{
  gateway: Gateway<unknown>;
  transports: Transport[];
}> {
  const running = await startGateway({
    routes: { events: '/rpc/events' },
    limits: { ratePerSecond: RATE, rateBurst: BURST, connectionsPerSecondPerIp: 0 },
  });
  const { gateway } = running;
  gateway.method('echo', (params) => params);
  const tcp = await gateway.listenTcp(0, '127.0.0.1');
  return {
    gateway,
    transports: [
      { open: () => tcpChannel(tcp.port) },
      { open: () => sseChannel(`${running.httpUrl}/rpc/events`) },
    ],
  };
}

/** What each message is answered: the refusal, the call's result, or -32003 (rate limited). */
type Outcome = 'invalid UTF-8' | 'answered' | 'rate limited';

function outcomes(answers: string[], sent: readonly boolean[]): Outcome[] {
  const byId = new Map<unknown, string>();
  let refusals = 0;
  for (const answer of answers) {
    if (answer === INVALID_UTF8) refusals++;
    else byId.set((JSON.parse(answer) as { id: unknown }).id, answer);
  }
  const seen = sent.map((valid, id): Outcome => {
    if (!valid) return 'invalid UTF-8';
    const reply = JSON.parse(byId.get(id) ?? 'null') as {
      result?: unknown;
      error?: { code: number };
    } | null;
    if (reply?.error?.code === -32003) return 'rate limited';
    if (reply?.result !== undefined) return 'answered';
    throw new Error(`call ${id}: ${JSON.stringify(reply)}`);
  });
  expect(refusals).toBe(sent.filter((valid) => !valid).length);
  return seen;
}

/** The model: every message takes a token while there is one; a call without one is refused. */
function expected(sent: readonly boolean[], burst: number): Outcome[] {
  let tokens = burst;
  return sent.map((valid) => {
    const had = tokens > 0;
    if (had) tokens--;
    if (!valid) return 'invalid UTF-8';
    return had ? 'answered' : 'rate limited';
  });
}

async function run(channel: Channel, sent: readonly boolean[]): Promise<Outcome[]> {
  for (const [id, valid] of sent.entries()) await channel.send(messageBytes(id, valid));
  await channel.until(sent.length);
  return outcomes(channel.answers(), sent);
}

describe('a message refused as not UTF-8 costs a rate token', () => {
  let gateway: Gateway<unknown>;
  let transports: Transport[];
  beforeAll(async () => {
    ({ gateway, transports } = await gatewayWithTransports());
  });
  afterAll(() => gateway.close({ timeoutMs: 1_000 }));

  const which = [
    ['NDJSON over TCP', 0],
    ['an HTTP streaming session', 1],
  ] as const;

  it.each(which)(
    '%s: the calls after BURST - 1 refusals: one answered, then -32003',
    async (_name, index) => {
      const channel = await transports[index]!.open();
      cleanups.push(() => channel.close());
      const sent = [false, false, false, true, true, true];
      const seen = await run(channel, sent);
      expect(seen.filter((outcome) => outcome === 'answered')).toHaveLength(1);
      expect(seen).toEqual([
        'invalid UTF-8',
        'invalid UTF-8',
        'invalid UTF-8',
        'answered',
        'rate limited',
        'rate limited',
      ]);
    },
  );

  it.each(which)('%s: past the burst a refusal is still answered -32700', async (_name, index) => {
    const channel = await transports[index]!.open();
    cleanups.push(() => channel.close());
    const sent = [true, true, true, true, false, true];
    expect(await run(channel, sent)).toEqual([
      'answered',
      'answered',
      'answered',
      'answered',
      'invalid UTF-8',
      'rate limited',
    ]);
  });

  it.each(which)(
    '%s: for any order of calls and refused messages, each takes a token in turn',
    async (_name, index) => {
      await fc.assert(
        fc.asyncProperty(fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }), async (sent) => {
          const channel = await transports[index]!.open();
          try {
            expect(await run(channel, sent)).toEqual(expected(sent, BURST));
          } finally {
            await channel.close();
          }
        }),
        { numRuns: 25 },
      );
    },
  );
});
