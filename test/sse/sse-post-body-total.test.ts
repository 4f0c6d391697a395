/**
 * limits.maxBufferedBytesTotal counts an event stream's POST body being read: a session's POSTs
 * are read one at a time, but each may be maxMessageBytes, and many sessions each sending one
 * slowly could together hold far more than the budget. Past it the sessions holding the most
 * are closed with 1013, largest first, as for queued output, and the POST whose body was being
 * read is answered 503 with Retry-After (its connection closed, the rest of its body unread).
 */
import { request } from 'node:http';
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { waitUntil, within } from '../support/waiting.js';
import { openStream } from './sse-raw.js';
import type { RawStream } from './sse-raw.js';

const running: RunningGateway[] = [];
const streams: RawStream[] = [];
const posts: ClientRequest[] = [];
afterEach(async () => {
  for (const post of posts.splice(0)) post.destroy();
  for (const stream of streams.splice(0)) stream.destroy();
  for (const gateway of running.splice(0)) await gateway.gateway.close({ timeoutMs: 1_000 });
});

const KiB = 1024;
const BUDGET = 2 * 1024 * KiB;
/** Each POST's body: declared at 1 000 KiB, this much of it sent. */
const DECLARED = 1000 * KiB;
const PART = 768 * KiB;
const SESSIONS = 4;

it('POST bodies being read count toward maxBufferedBytesTotal: past it the largest sessions close 1013, their POST 503', async () => {
  const gateway = await startGateway({
    heartbeatIntervalMs: 0,
    routes: { events: '/rpc/events' },
    limits: { maxBufferedBytesTotal: BUDGET, bytesPerSecondPerIp: 0, ratePerSecond: 0 },
  });
  running.push(gateway);
  gateway.gateway.method('length', (params) => (params as [string])[0].length);
  // The gateway's side of each connection, by the client's port.
  const serverSockets = new Map<number, Socket>();
  gateway.gateway.httpServer.on('connection', (socket: Socket) =>
    serverSockets.set(socket.remotePort!, socket),
  );
  /** Whether the gateway has read every byte `post` has written (headers and body so far). */
  const allRead = (post: ClientRequest): boolean => {
    const socket = post.socket;
    if (!socket) return false;
    const server = serverSockets.get(socket.localPort!);
    return server !== undefined && server.bytesRead === socket.bytesWritten;
  };
  const url = `${gateway.httpUrl}/rpc/events`;
  const opened: RawStream[] = [];
  for (let i = 0; i < SESSIONS; i++) {
    const stream = await openStream(url);
    streams.push(stream);
    opened.push(stream);
  }
  await waitUntil(() => gateway.gateway.sessions.size === SESSIONS, 'the sessions');
  const sessionOf = (stream: RawStream) =>
    [...gateway.gateway.sessions.values()].find(
      (s) => (s.transport as unknown as { sessionId: string }).sessionId === stream.session.session,
    );
  const sessions = opened.map((stream) => sessionOf(stream)!);
  const head = '{"jsonrpc":"2.0","id":1,"method":"length","params":["';
  const tail = '"]}';
  const body = head + 'x'.repeat(DECLARED - head.length - tail.length) + tail;
  const answers: Promise<{ status: number; headers: IncomingMessage['headers'] }>[] = [];
  for (const stream of opened) {
    const post = request(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-length': String(DECLARED),
        'x-wsrpc-session': stream.session.session,
        'x-wsrpc-secret': stream.session.secret,
      },
    });
    post.on('error', () => undefined);
    posts.push(post);
    answers.push(
      new Promise((resolve) =>
        post.once('response', (response) => {
          response.resume();
          resolve({ status: response.statusCode ?? 0, headers: response.headers });
        }),
      ),
    );
    post.write(body.slice(0, PART));
  }
  // Every byte arrived (or its session was closed): then a turn for the budget's check.
  await waitUntil(
    () => sessions.every((session, i) => session.isClosed || allRead(posts[i]!)),
    'the bodies to arrive',
  );
  await new Promise((resolve) => setImmediate(resolve));

  const closed = sessions.filter((s) => s.isClosed);
  expect(closed.length).toBeGreaterThan(0);
  for (const session of closed) {
    expect(await within(session.closed, 'the close')).toMatchObject({ code: 1013 });
    const answer = await within(answers[sessions.indexOf(session)]!, 'the refusal');
    expect(answer.status).toBe(503);
    expect(answer.headers['retry-after']).toBe('1');
    expect(answer.headers.connection).toBe('close');
  }
  const open = opened.filter((_, i) => !sessions[i]!.isClosed);
  // What they hold: their bodies so far, and what their replay buffers keep (the first event).
  const held = open.reduce(
    (sum, stream) =>
      sum + (sessionOf(stream)!.transport as unknown as { budgetBytes: number }).budgetBytes,
    0,
  );
  expect(held).toBeGreaterThanOrEqual(open.length * PART);
  expect(held).toBeLessThanOrEqual(BUDGET);
  // A session left is served: its body ends, 202, and the answer comes on its stream.
  const kept = open[0]!;
  const index = opened.indexOf(kept);
  posts[index]!.end(body.slice(PART));
  expect((await within(answers[index]!, 'the 202')).status).toBe(202);
  const events = await kept.until((got) => got.some((e) => e.data.includes('"result"')), 10_000);
  const answer = events.find((e) => e.data.includes('"result"'))!;
  expect(JSON.parse(answer.data)).toMatchObject({ id: 1, result: DECLARED - 56 });
});

it('a session ended while its POST body is read stops the reading: the POST is answered 404 at once', async () => {
  const gateway = await startGateway({ heartbeatIntervalMs: 0, routes: { events: '/rpc/events' } });
  running.push(gateway);
  const url = `${gateway.httpUrl}/rpc/events`;
  const stream = await openStream(url);
  streams.push(stream);
  const headers = {
    'x-wsrpc-session': stream.session.session,
    'x-wsrpc-secret': stream.session.secret,
  };
  const session = [...gateway.gateway.sessions.values()][0]!;
  const transport = session.transport as unknown as { budgetBytes: number };
  const post = request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': '4096', ...headers },
  });
  post.on('error', () => undefined);
  posts.push(post);
  const answer = new Promise<IncomingMessage>((resolve) => post.once('response', resolve));
  post.write('{"jsonrpc":"2.0","method":"x","params":["');
  // Counted while it is read (the session's replay buffer holds its first event besides).
  const before = transport.budgetBytes;
  await waitUntil(() => transport.budgetBytes > before, 'the body to be counted');
  const ended = await fetch(url, { method: 'DELETE', headers });
  expect(ended.status).toBe(204);
  const response = await within(answer, 'the answer to the POST');
  expect(response.statusCode).toBe(404);
  expect(response.headers.connection).toBe('close');
  response.resume();
});
