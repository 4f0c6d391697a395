/**
 * An event stream whose reader stopped reading, once it is no longer the session's stream (the
 * session deleted or closed, or the stream replaced by a resume): its socket is cut at once,
 * so what it could not send is neither kept in the process outside every bound nor left to the
 * kernel's send queue. A session holds at most one stream; resumes are rate limited per session;
 * a resume without Last-Event-ID replays every event still kept.
 */
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

async function gatewayFor(limits: Parameters<typeof stalledStreamsGateway>[0] = {}) {
  const running = await stalledStreamsGateway({ maxBufferedBytes: 0, ...limits });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  return running;
}

async function open(
  running: StalledStreamsGateway,
  headers: Record<string, string> = {},
  stall = false,
): Promise<RawEventStream> {
  const stream = await openRawStream(running.port, headers, { stall });
  cleanups.push(() => stream.socket.destroy());
  return stream;
}

/** A session whose stream is not read and holds `bytes` unsent in the server. */
async function stalledSession(running: StalledStreamsGateway, bytes = 64 * 1024) {
  const stream = await open(running, {}, true);
  await running.fillUntilQueued(stream.session.session, bytes);
  const serverSocket = running.serverSocketOf(stream);
  expect(serverSocket.writableLength).toBeGreaterThanOrEqual(bytes);
  return { stream, serverSocket };
}

const ids = (text: string): number[] =>
  [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));

describe('event streams no longer read', () => {
  it('a session deleted while its stream holds unsent bytes: the socket is cut at once', async () => {
    const running = await gatewayFor();
    const { stream, serverSocket } = await stalledSession(running);
    expect(await deleteSession(running.port, stream.session)).toBe('HTTP/1.1 204 No Content');
    expect(serverSocket.destroyed).toBe(true);
    expect(serverSocket.writableLength).toBe(0);
    // A paused socket learns of the reset once it reads again.
    stream.socket.resume();
    await within(stream.closed, 'the client saw its stream cut');
  });

  it('a session the server closes while its stream holds unsent bytes: the socket is cut at once', async () => {
    const running = await gatewayFor();
    const { stream, serverSocket } = await stalledSession(running);
    const session = [...running.gateway.sessions.values()][0]!;
    session.close(1000, 'done');
    await settleTurns();
    expect(serverSocket.destroyed).toBe(true);
    // A paused socket learns of the reset once it reads again.
    stream.socket.resume();
    await within(stream.closed, 'the client saw its stream cut');
  });

  it('a session the server closes with nothing unsent: the close event, then the end', async () => {
    const running = await gatewayFor();
    const stream = await open(running);
    const session = [...running.gateway.sessions.values()][0]!;
    session.close(4000, 'bye');
    await within(stream.closed, 'the stream ended');
    expect(stream.text()).toContain('event: close\ndata: {"code":4000,"reason":"bye"}\n\n');
  });

  it('a resume replaces a stalled stream: the old socket is cut at once, the budget holds the new one only', async () => {
    const running = await gatewayFor({ sseReplayBytes: 32 * 1024 * 1024 });
    const { stream, serverSocket } = await stalledSession(running, 256 * 1024);
    const resumed = await open(running, resumeOf(stream.session, 0), true);
    expect(resumed.status).toBe('HTTP/1.1 200 OK');
    expect(serverSocket.destroyed).toBe(true);
    stream.socket.resume();
    await within(stream.closed, 'the client saw its old stream cut');
    await settleTurns();
    const transport = running.transportOf(stream.session.session)!;
    const current = running.serverSocketOf(resumed);
    expect(transport.stream?.socket).toBe(current);
    expect(transport.budgetBytes).toBe(current.writableLength + transport.replayKeptBytes);
  });

  it('a resume cuts the stream it replaces even when that one is read', async () => {
    const running = await gatewayFor();
    const first = await open(running);
    const serverSocket = running.serverSocketOf(first);
    const resumed = await open(running, resumeOf(first.session, 0));
    expect(resumed.status).toBe('HTTP/1.1 200 OK');
    expect(serverSocket.destroyed).toBe(true);
  });

  it('many resumes of one stalled session hold one stream socket in the server', async () => {
    const running = await gatewayFor({ sseReplayBytes: 8 * 1024 * 1024 });
    const { stream } = await stalledSession(running, 512 * 1024);
    const streams = [stream];
    for (let i = 0; i < 8; i++) {
      const next = await open(running, resumeOf(stream.session, 0), true);
      expect(next.status).toBe('HTTP/1.1 200 OK');
      streams.push(next);
    }
    const open_ = streams.filter((s) => !running.serverSocketOf(s).destroyed);
    expect(open_).toEqual([streams.at(-1)]);
  });

  it('a resume without Last-Event-ID on an existing session replays every event still kept', async () => {
    const running = await gatewayFor();
    const first = await open(running);
    const session = [...running.gateway.sessions.values()][0]!;
    for (let n = 1; n <= 3; n++) session.notify('tick', [n]);
    await waitUntil(() => ids(first.text()).length === 3, 'three events read');
    first.socket.destroy();
    await first.closed;
    await waitUntil(() => !running.transportOf(first.session.session)?.stream, 'the stream gone');
    const resumed = await open(running, resumeOf(first.session));
    expect(resumed.status).toBe('HTTP/1.1 200 OK');
    await waitUntil(() => ids(resumed.text()).length === 3, 'the events replayed');
    expect(ids(resumed.text())).toEqual([1, 2, 3]);
  });

  it('resumes past the per-session budget are refused 429 with Retry-After, the stream in place kept', async () => {
    const running = await gatewayFor();
    const first = await open(running);
    const statuses: string[] = [];
    let refused: RawEventStream | undefined;
    let current = first;
    const started = Date.now();
    for (let i = 0; i < 100 && !refused; i++) {
      const next = await open(running, resumeOf(first.session, 0));
      statuses.push(next.status);
      if (next.status === 'HTTP/1.1 200 OK') current = next;
      else refused = next;
    }
    const seconds = (Date.now() - started) / 1000;
    expect(refused?.status).toBe('HTTP/1.1 429 Too Many Requests');
    expect(Number(refused!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(refused!.headers.connection).toBe('close');
    await within(refused!.closed, 'the refused connection closed');
    // At most the burst (10) at once, then one a second.
    expect(statuses.filter((s) => s === 'HTTP/1.1 200 OK').length).toBeLessThanOrEqual(
      10 + Math.ceil(seconds),
    );
    // The refusal replaced nothing: the last stream resumed is still the session's.
    const transport = running.transportOf(first.session.session)!;
    expect(transport.stream?.socket).toBe(running.serverSocketOf(current));
    expect(transport.isClosed).toBe(false);
  });
});
