/**
 * limits.maxBufferedBytesTotal counts the POST /rpc bodies being read with every connection's
 * queues and input: each socket reads one body at a time, but each may be maxMessageBytes, and
 * many sockets each sending one slowly could together hold far more than the budget. Past it
 * the readings holding the most are stopped, largest first, until the total is back within it;
 * each such POST is answered 503 with Retry-After and Connection: close, the rest of its body
 * unread. A body left reading is answered once it ends.
 */
import { request } from 'node:http';
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { waitUntil, within } from '../support/waiting.js';

const running: RunningGateway[] = [];
const posts: ClientRequest[] = [];
afterEach(async () => {
  for (const post of posts.splice(0)) post.destroy();
  for (const gateway of running.splice(0)) await gateway.gateway.close({ timeoutMs: 1_000 });
});

const KiB = 1024;
const BUDGET = 2 * 1024 * KiB;
/** Each POST's body: declared at 1 000 KiB, this much of it sent. */
const DECLARED = 1000 * KiB;
const PART = 768 * KiB;
const POSTS = 4;

interface Answer {
  status: number;
  headers: IncomingMessage['headers'];
  body: string;
}

it('POST /rpc bodies being read count toward maxBufferedBytesTotal: past it the largest are answered 503, the rest read on', async () => {
  const gateway = await startGateway({
    heartbeatIntervalMs: 0,
    limits: { maxBufferedBytesTotal: BUDGET, bytesPerSecondPerIp: 0, ratePerSecond: 0 },
  });
  running.push(gateway);
  gateway.gateway.method('length', (params) => (params as [string])[0].length);
  // The gateway's side of each connection, by the client's port.
  const serverSockets = new Map<number, Socket>();
  gateway.gateway.httpServer.on('connection', (socket: Socket) =>
    serverSockets.set(socket.remotePort!, socket),
  );
  const serverSide = (post: ClientRequest): Socket | undefined =>
    post.socket ? serverSockets.get(post.socket.localPort!) : undefined;
  const url = `${gateway.httpUrl}/rpc`;
  const head = '{"jsonrpc":"2.0","id":1,"method":"length","params":["';
  const tail = '"]}';
  const body = head + 'x'.repeat(DECLARED - head.length - tail.length) + tail;
  const answers: Promise<Answer>[] = [];
  const settled: (Answer | undefined)[] = [];
  for (let i = 0; i < POSTS; i++) {
    const post = request(url, {
      method: 'POST',
      agent: false,
      headers: { 'content-type': 'application/json', 'content-length': String(DECLARED) },
    });
    post.on('error', () => undefined);
    posts.push(post);
    const answer = new Promise<Answer>((resolve) =>
      post.once('response', (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => {
          const got = { status: response.statusCode ?? 0, headers: response.headers, body: text };
          settled[i] = got;
          resolve(got);
        });
      }),
    );
    answers.push(answer);
    post.write(body.slice(0, PART));
  }
  // Every part read by the gateway, or its POST refused: then a turn for the budget's check.
  await waitUntil(
    () =>
      posts.every((post, i) => {
        const server = serverSide(post);
        return (
          settled[i] !== undefined ||
          (server !== undefined && server.bytesRead === post.socket!.bytesWritten)
        );
      }),
    'the bodies to arrive',
  );
  await new Promise((resolve) => setImmediate(resolve));
  await waitUntil(() => settled.filter(Boolean).length > 0, 'a refusal');

  const refused = posts.filter((_, i) => settled[i] !== undefined);
  expect(refused.length).toBeGreaterThan(0);
  expect(refused.length).toBeLessThan(POSTS);
  for (const post of refused) {
    const answer = settled[posts.indexOf(post)]!;
    expect(answer.status).toBe(503);
    expect(answer.headers['retry-after']).toBe('1');
    expect(answer.headers.connection).toBe('close');
  }
  // What the gateway holds of the bodies still being read: their parts, within the budget.
  const reading = posts.filter((_, i) => settled[i] === undefined);
  expect(reading.length * PART).toBeLessThanOrEqual(BUDGET);
  // A body left is served: it ends, and its call is answered.
  const kept = reading[0]!;
  kept.end(body.slice(PART));
  const answer = await within(answers[posts.indexOf(kept)]!, 'the answer');
  expect(answer.status).toBe(200);
  expect(JSON.parse(answer.body)).toMatchObject({ id: 1, result: DECLARED - 56 });
});
