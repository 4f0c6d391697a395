/*
 * Model-based property test of the incoming calls a connection is running (IncomingCalls in
 * src/peer/incoming-calls.ts, which keeps them as a list through the calls rather than in a
 * table): random runs of requests (ids from a small pool, so some run under the same id) and
 * notifications whose handlers wait to be told to end, handlers ending with a result or an error,
 * rpc.cancel of an id, and the connection closing, checked against a model after every step.
 * The invariants: the count in flight is the number of handlers still running; a call beyond
 * maxInFlight is answered -32000 and runs nothing (a notification beyond it is dropped);
 * rpc.cancel aborts the oldest running call with that id and no other; a call's end answers it
 * (-32001 once cancelled, whatever its handler returned), and an ended call cannot be cancelled
 * any more; closing aborts every running call and
 * answers none of them, and what ends after the close changes nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { HandlerContext } from '../../src/peer/handler-context.js';
import { IncomingCalls } from '../../src/peer/incoming-calls.js';
import { silentLogger } from '../../src/peer/logger.js';
import { MethodRegistry } from '../../src/peer/method-registry.js';
import { peerConfig } from '../../src/peer/peer-options.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { settle } from '../support/peers.js';
import { deferred } from '../support/promises.js';
import type { Deferred } from '../support/promises.js';

const MAX_IN_FLIGHT = 4;
const IDS = [1, 2, 3, 'a'] as const;

type Op =
  | { kind: 'request'; id: (typeof IDS)[number] }
  | { kind: 'notify' }
  | { kind: 'end'; pick: number; fail: boolean }
  | { kind: 'cancel'; id: (typeof IDS)[number] }
  | { kind: 'close' };

const idArb = fc.constantFrom(...IDS);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('request' as const), id: idArb }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('notify' as const) }) },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('end' as const), pick: fc.nat(), fail: fc.boolean() }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('cancel' as const), id: idArb }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('close' as const) }) },
);

/** A handler started: what it was given, and how the test ends it. */
interface Started {
  ctx: HandlerContext<string>;
  end: Deferred<string>;
}

/** The model's view of a running call: its id (none for a notification), whether aborted. */
interface ModelCall {
  id: number | string | undefined;
  aborted: boolean;
  started: Started;
  /** A request's answer, once it has come (undefined: none yet). */
  reply: Promise<unknown> | undefined;
}

async function run(ops: Op[]): Promise<void> {
  const started: Started[] = [];
  const registry = new MethodRegistry<string>();
  registry.method('work', (_params, ctx) => {
    const end = deferred<string>();
    started.push({ ctx, end });
    return end.promise;
  });
  const incoming = new IncomingCalls<string>(
    'session',
    silentLogger,
    peerConfig<string>({ registry, maxInFlight: MAX_IN_FLIGHT }),
    undefined,
  );
  const running: ModelCall[] = [];
  const ended: ModelCall[] = [];
  let closed = false;

  for (const op of ops) {
    switch (op.kind) {
      case 'request': {
        // A closed peer reads no more frames (PeerCore.receive): nothing comes in after it.
        if (closed) break;
        const before = started.length;
        const reply = incoming.request(op.id, 'work', undefined, '2.0');
        if (running.length >= MAX_IN_FLIGHT) {
          // Busy: answered at once, nothing run.
          expect(JSON.parse(reply as string)).toMatchObject({
            id: op.id,
            error: { code: ErrorCode.ServerBusy, data: { maxInFlight: MAX_IN_FLIGHT } },
          });
          expect(started.length).toBe(before);
          break;
        }
        expect(started.length).toBe(before + 1);
        running.push({
          id: op.id,
          aborted: false,
          started: started.at(-1)!,
          reply: Promise.resolve(reply),
        });
        break;
      }
      case 'notify': {
        if (closed) break;
        const before = started.length;
        incoming.notification('work', undefined);
        if (running.length >= MAX_IN_FLIGHT) {
          // Dropped: nothing run.
          expect(started.length).toBe(before);
          break;
        }
        expect(started.length).toBe(before + 1);
        running.push({ id: undefined, aborted: false, started: started.at(-1)!, reply: undefined });
        break;
      }
      case 'end': {
        const pool = running.length > 0 ? running : ended;
        if (pool.length === 0) break;
        const [call] = pool.splice(op.pick % pool.length, 1);
        if (op.fail) call!.started.end.reject(new Error('handler failed'));
        else call!.started.end.resolve('done');
        // The handler's continuations (its `then`s) run.
        await settle(1);
        if (pool === running) ended.push(call!);
        // A request's answer: its result or error, or none when the connection had closed.
        if (call!.reply) {
          const reply = await call!.reply;
          if (closed) expect(reply).toBeUndefined();
          else
            expect(JSON.parse(reply as string)).toEqual({
              jsonrpc: '2.0',
              id: call!.id,
              // A cancelled call is answered -32001 however its handler ended.
              ...(call!.aborted
                ? { error: { code: ErrorCode.RequestCancelled, message: 'Request cancelled' } }
                : op.fail
                  ? { error: { code: ErrorCode.InternalError, message: 'Internal error' } }
                  : { result: 'done' }),
            });
          call!.reply = undefined;
        }
        break;
      }
      case 'cancel': {
        incoming.notification('rpc.cancel', { id: op.id });
        if (closed) break;
        const oldest = running.find((c) => c.id === op.id);
        if (oldest) oldest.aborted = true;
        break;
      }
      case 'close': {
        if (!closed) {
          incoming.close({ code: 1000, reason: '' });
          closed = true;
          for (const call of running) call.aborted = true;
          ended.push(...running.splice(0));
        }
        break;
      }
    }
    expect(incoming.inFlightCount).toBe(running.length);
    for (const call of [...running, ...ended]) {
      expect(call.started.ctx.signal.aborted, `call ${String(call.id)}`).toBe(call.aborted);
    }
  }
}

describe('the calls a connection is running (model)', () => {
  it('count, cancel, end and close follow the model', async () => {
    await fc.assert(fc.asyncProperty(fc.array(opArb, { maxLength: 40 }), run), {
      numRuns: Number(process.env['FC_RUNS'] ?? 2000),
    });
  });

  it('rpc.cancel reaches a running call whose id a call now ended had first', async () => {
    // Two calls under one id, the first one ended: the cancel is for the one still running.
    await run([
      { kind: 'request', id: 1 },
      { kind: 'request', id: 1 },
      { kind: 'end', pick: 0, fail: false },
      { kind: 'cancel', id: 1 },
    ]);
  });
});
