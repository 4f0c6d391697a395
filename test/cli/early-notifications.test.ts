/**
 * Notifications that come before the subscribe answer are kept, at most 10 000 of them; past
 * that a message is dropped and counted, and the count told on stderr once the answer names the
 * subscription, but the end of the stream (complete, error) is always kept: `subscribe` ends as
 * the server ended it rather than waiting for an end it dropped. In-process, over a real
 * WebSocket, against src.
 */
import { afterEach, expect, it } from 'vitest';
import { Deadline } from '../../src/cli/deadline.js';
import { endpointOf } from '../../src/cli/endpoint.js';
import { reportFailure } from '../../src/cli/errors.js';
import { MAX_EARLY_MESSAGES } from '../../src/cli/limits.js';
import { runSubscribe } from '../../src/cli/subscribe.js';
import { WsConnection } from '../../src/cli/ws-connection.js';
import { DEFAULT_SUBSCRIPTION_METHODS } from '../../src/protocol/subscription-frames.js';
import { rawWsServer } from '../support/raw-ws-server.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const options = { headers: {}, protocols: [], insecure: false, ca: undefined };
const DROPPED = 5;

const notification = (params: unknown): string =>
  JSON.stringify({ jsonrpc: '2.0', method: 'subscription', params });

/**
 * A server that, asked to subscribe, first sends MAX_EARLY_MESSAGES + DROPPED messages of "sub1"
 * and then its end (`last`), and only then the answer naming "sub1".
 */
async function earlyServer(last: Record<string, unknown>): Promise<string> {
  return rawWsServer(cleanups, (socket, text) => {
    const { id, method } = JSON.parse(text) as { id: number; method: string };
    if (method !== 'subscribe') {
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, result: true }));
      return;
    }
    for (let n = 0; n < MAX_EARLY_MESSAGES + DROPPED; n++) {
      socket.send(notification({ subscription: 'sub1', result: n }));
    }
    socket.send(notification({ subscription: 'sub1', ...last }));
    socket.send(JSON.stringify({ jsonrpc: '2.0', id, result: 'sub1' }));
  });
}

/** Run `subscribe` as main() does; fails rather than waits when it has not ended in 15 s. */
async function subscribe(url: string) {
  const deadline = new Deadline(10_000);
  const connection = await WsConnection.open(endpointOf(new URL(url))!, options, deadline);
  cleanups.push(() => connection.close());
  const stop = new AbortController();
  cleanups.push(() => stop.abort());
  const lines: string[] = [];
  let stderr = '';
  const run = runSubscribe(connection, {
    topic: 'ticker',
    params: undefined,
    methods: { ...DEFAULT_SUBSCRIPTION_METHODS },
    deadline,
    stop: stop.signal,
    stdout: { write: (text: string) => lines.push(text) },
    stderr: { write: (text: string) => (stderr += text) },
  }).then(
    () => 0,
    (err: unknown) => reportFailure(err, { write: (text: string) => (stderr += text) }),
  );
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((resolve) => (timer = setTimeout(resolve, 15_000, 'hung')));
  const code = await Promise.race([run, hung]);
  clearTimeout(timer);
  return { code, lines, stderr };
}

it('a complete past the 10 000 kept before the answer ends the stream; the drop is told', async () => {
  const result = await subscribe(await earlyServer({ complete: true }));
  expect(result.code).toBe(0);
  expect(result.lines).toHaveLength(MAX_EARLY_MESSAGES);
  expect(result.lines.at(-1)).toBe(`${MAX_EARLY_MESSAGES - 1}\n`);
  expect(result.stderr).toBe(
    `wsrpc: ${DROPPED} messages were dropped: they came before the server answered "subscribe", past the ${MAX_EARLY_MESSAGES} the CLI keeps until then\n`,
  );
}, 30_000);

it('an error past the 10 000 kept before the answer ends the stream with exit 1', async () => {
  const result = await subscribe(
    await earlyServer({ error: { code: -32000, message: 'stream failed' } }),
  );
  expect(result.code).toBe(1);
  expect(result.lines).toHaveLength(MAX_EARLY_MESSAGES);
  expect(result.stderr).toContain(`wsrpc: ${DROPPED} messages were dropped`);
  expect(result.stderr).toContain('error -32000: stream failed');
}, 30_000);
