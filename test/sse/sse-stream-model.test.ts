/**
 * The invariant of a session's event streams, for any sequence of resumes (read or not, with or
 * without Last-Event-ID), sends, client drops, deletes and server closes: the server holds at
 * most one live stream socket for the session (none once it is closed), and every byte queued on
 * a stream socket still open is one the output budget counts (the session's current stream):
 * a stream that is no longer the session's holds nothing.
 */
import fc from 'fast-check';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { waitUntil, within } from '../support/waiting.js';
import {
  deleteSession,
  openRawStream,
  resumeOf,
  settleTurns,
  stalledStreamsGateway,
} from './stalled-streams.js';
import type { RawEventStream, StalledStreamsGateway } from './stalled-streams.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

type Op =
  | { kind: 'resume'; stall: boolean; withId: boolean }
  | { kind: 'send'; fill: boolean }
  | { kind: 'drop' }
  | { kind: 'delete' }
  | { kind: 'serverClose' };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('resume' as const),
      stall: fc.boolean(),
      withId: fc.boolean(),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('send' as const), fill: fc.boolean() }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'drop' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'delete' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'serverClose' as const }) },
);

/** The server sockets of the session's streams that are still open. */
function openServerSockets(running: StalledStreamsGateway, streams: RawEventStream[]): Socket[] {
  return streams.map((s) => running.serverSocketOf(s)).filter((s) => !s.destroyed);
}

async function checkInvariant(
  running: StalledStreamsGateway,
  sessionId: string,
  streams: RawEventStream[],
): Promise<void> {
  await settleTurns();
  const transport = running.transportOf(sessionId);
  const current = transport?.stream?.socket ?? undefined;
  const sockets = openServerSockets(running, streams);
  // A stream ended politely (nothing left unsent) finishes on its own; one that is still
  // writing is the session's current stream.
  const live = sockets.filter((s) => !s.writableEnded);
  expect(live.length).toBeLessThanOrEqual(1);
  if (live.length === 1) expect(live[0]).toBe(current);
  const unaccounted = sockets
    .filter((s) => s !== current)
    .reduce((sum, s) => sum + s.writableLength, 0);
  expect(unaccounted).toBe(0);
  // With what its replay buffer keeps.
  if (current) {
    expect(transport!.budgetBytes).toBe(current.writableLength + transport!.replayKeptBytes);
  }
}

describe('event streams of one session (model)', () => {
  it('hold at most one live socket, and no unsent byte outside the budget', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.boolean(),
        fc.array(op, { minLength: 1, maxLength: 8 }),
        async (stallFirst, ops) => {
          const running = await stalledStreamsGateway({
            maxBufferedBytes: 0,
            sseReplayBytes: 64 * 1024 * 1024,
          });
          const streams: RawEventStream[] = [];
          try {
            const first = await openRawStream(running.port, {}, { stall: stallFirst });
            streams.push(first);
            const id = first.session.session;
            let alive = true;
            /** Whether the session's current stream is one that is not read. */
            let stalled = stallFirst;
            for (const step of ops) {
              const transport = running.transportOf(id);
              if (step.kind === 'resume') {
                const next = await openRawStream(
                  running.port,
                  resumeOf(first.session, step.withId ? 0 : undefined),
                  { stall: step.stall },
                );
                expect(next.status).toBe(alive ? 'HTTP/1.1 200 OK' : 'HTTP/1.1 404 Not Found');
                if (alive) {
                  streams.push(next);
                  stalled = step.stall;
                } else next.socket.destroy();
              } else if (step.kind === 'send' && alive) {
                const session = [...running.gateway.sessions.values()].find(
                  (s) => s.transport === (transport as unknown),
                )!;
                // A stalled stream is filled until the server queues some of it itself (past
                // what the kernel's buffers took); a read one gets a message.
                if (step.fill && stalled) await running.fillUntilQueued(id, 256 * 1024);
                else session.notify('data', ['d'.repeat(1024)]);
              } else if (step.kind === 'drop') {
                const last = streams.at(-1)!;
                const server = running.serverSocketOf(last);
                last.socket.destroy();
                await within(
                  new Promise((resolve) =>
                    server.destroyed ? resolve(undefined) : server.once('close', resolve),
                  ),
                  'the server saw the drop',
                );
              } else if (step.kind === 'delete') {
                const status = await deleteSession(running.port, first.session);
                expect(status).toBe(alive ? 'HTTP/1.1 204 No Content' : 'HTTP/1.1 404 Not Found');
                alive = false;
              } else if (step.kind === 'serverClose' && alive) {
                const session = [...running.gateway.sessions.values()].find(
                  (s) => s.transport === (transport as unknown),
                )!;
                session.close(1000, 'done');
                alive = false;
              }
              await checkInvariant(running, id, streams);
              if (!alive) {
                expect(running.transportOf(id)).toBeUndefined();
                await waitUntil(
                  () => openServerSockets(running, streams).length === 0,
                  'every stream socket of the closed session gone',
                );
              }
            }
          } finally {
            for (const stream of streams) stream.socket.destroy();
            await running.gateway.close({ timeoutMs: 1_000 });
          }
        },
      ),
      { numRuns: 25 },
    );
  }, 120_000);
});
