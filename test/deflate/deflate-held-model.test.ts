/**
 * What a permessage-deflate connection holds of what it sent, against a model, on a real
 * gateway: random writes of compressed requests that inflate up to maxMessageBytes, small ones
 * sent uncompressed (as a client sends what is under its threshold) and pings, cut into TCP
 * writes at random and spaced at random, past the connection's input budget. The model is the
 * order the requests were written in: every one is handled, once, in that order (nothing lost
 * while frames wait to be inflated). And whenever the gateway has handed over a message, it
 * holds at most one inflated message not handled yet, however many the reads carried.
 */
import fc from 'fast-check';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import { newSession, sessionIds } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';
import { clientFrame, handmadeDeflateClient } from './wire.js';

const MAX_MESSAGE_BYTES = 32 * 1024;
/** Burst 2 × maxMessageBytes: a few large requests in a row and the next waits. */
const BYTES_PER_SECOND = 2 * 1024 * 1024;
/** How a large request's text starts: what tells it among the held texts. */
const LARGE = '{"jsonrpc":"2.0","method":"large"';

const res = new Resources();
let running: RunningGateway;
/** Ids handled by the gateway, by the connection's session id. */
const handled = new Map<string, number[]>();

beforeAll(async () => {
  running = await res.gateway({
    perMessageDeflate: true,
    heartbeatIntervalMs: 0,
    limits: {
      maxMessageBytes: MAX_MESSAGE_BYTES,
      bytesPerSecond: BYTES_PER_SECOND,
      bytesPerSecondPerIp: 0,
    },
  });
  const record = (ctx: { id?: unknown; session: { id: string } }): number => {
    const id = ctx.id as number;
    handled.get(ctx.session.id)?.push(id);
    return id;
  };
  running.gateway.method('large', (_params, ctx) => record(ctx));
  running.gateway.method('small', (_params, ctx) => record(ctx));
});
afterAll(() => res.cleanup());

type Frame = { kind: 'large'; bytes: number } | { kind: 'small' } | { kind: 'ping' };

interface Model {
  /** Requests written so far (ids 1 to `written`). */
  written: number;
}

interface Real {
  socket: Socket;
  transport: WsTransport;
  /** The most inflated (large) messages held at once, looked at after each message. */
  mostLargeHeld: number;
}

/** The large texts among those `transport` holds, not handed over yet. */
function largeHeld(transport: WsTransport): number {
  const held = (transport as unknown as { held?: { texts: string[]; from: number } }).held;
  if (held === undefined) return 0;
  let count = 0;
  for (let i = held.from; i < held.texts.length; i++) {
    if (held.texts[i]!.startsWith(LARGE)) count++;
  }
  return count;
}

/** Frames in one TCP write; requests numbered on from the model's count. */
class Write implements fc.AsyncCommand<Model, Real, false> {
  constructor(readonly frames: Frame[]) {}
  check(): boolean {
    return true;
  }
  async run(model: Model, real: Real): Promise<void> {
    const bytes = this.frames.map((frame) => {
      if (frame.kind === 'ping') return clientFrame(Buffer.from('p'), 0x9, false);
      const id = ++model.written;
      if (frame.kind === 'small') {
        return clientFrame(
          Buffer.from(`{"jsonrpc":"2.0","method":"small","id":${id}}`),
          0x1,
          false,
        );
      }
      const pad = 'a'.repeat(frame.bytes);
      const text = `${LARGE},"id":${id},"params":["${pad}"]}`;
      return clientFrame(Buffer.from(text), 0x1, true);
    });
    real.socket.write(Buffer.concat(bytes));
    await Promise.resolve();
  }
  toString(): string {
    return `write(${this.frames.map((f) => (f.kind === 'large' ? f.bytes : f.kind)).join(' ')})`;
  }
}

/** Let the gateway read for a while before the next write. */
class Pause implements fc.AsyncCommand<Model, Real, false> {
  constructor(readonly ms: number) {}
  check(): boolean {
    return true;
  }
  async run(): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, this.ms));
  }
  toString(): string {
    return `pause(${this.ms})`;
  }
}

const frame: fc.Arbitrary<Frame> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .integer({ min: 1024, max: MAX_MESSAGE_BYTES - 128 })
      .map((bytes) => ({ kind: 'large' as const, bytes })),
  },
  { weight: 2, arbitrary: fc.constant({ kind: 'small' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'ping' as const }) },
);

const commands = fc.commands<Model, Real, false>(
  [
    fc.array(frame, { minLength: 1, maxLength: 24 }).map((frames) => new Write(frames)),
    fc.integer({ min: 0, max: 30 }).map((ms) => new Pause(ms)),
  ],
  { maxCommands: 10 },
);

async function connection(gateway: Gateway): Promise<{ real: Real; sessionId: string }> {
  const before = sessionIds(gateway);
  const client = await handmadeDeflateClient(running.port);
  res.netSockets.push(client.socket);
  expect(client.head).toMatch(/^HTTP\/1\.1 101 /);
  expect(client.head.toLowerCase()).toContain('permessage-deflate');
  const session = newSession(gateway, before);
  const transport = session.transport as WsTransport;
  const real: Real = { socket: client.socket, transport, mostLargeHeld: 0 };
  const onMessage = transport.onSocketMessage.bind(transport);
  transport.onSocketMessage = (data, isBinary) => {
    onMessage(data, isBinary);
    real.mostLargeHeld = Math.max(real.mostLargeHeld, largeHeld(transport));
  };
  handled.set(session.id, []);
  return { real, sessionId: session.id };
}

it('handles every request once, in the order written, holding at most one inflated message at a time', async () => {
  const { gateway } = running;
  await fc.assert(
    fc.asyncProperty(commands, async (cmds) => {
      const { real, sessionId } = await connection(gateway);
      const model: Model = { written: 0 };
      try {
        await fc.asyncModelRun(() => ({ model, real }), cmds);
        const ids = handled.get(sessionId)!;
        await waitUntil(() => ids.length >= model.written, 'every request handled', 15_000);
        expect(ids).toEqual(Array.from({ length: model.written }, (_, i) => i + 1));
        expect(real.mostLargeHeld).toBeLessThanOrEqual(1);
      } finally {
        real.socket.destroy();
        handled.delete(sessionId);
      }
    }),
    // A failure is reported as found: shrinking it opens a connection for every step.
    { numRuns: 25, endOnFailure: true },
  );
}, 120_000);
