// Output held for an expired TCP connection whose refresh is being checked counts, with what its
// socket has queued, toward the heartbeat's check of a peer that does not read
// (`maxBufferedBytes`): each alone below it, together above it at two visits in a row with nothing
// written between them, the connection is closed 1008 `not reading`, before the check ends. TCP
// has no ping, so this check is how a TCP peer that stopped reading is found.
import { connect as netConnect } from 'node:net';
import { firstValueFrom } from 'rxjs';
import { afterEach, expect, it } from 'vitest';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { deferred, sleep } from '../support/promises.js';
import { waitUntil, within } from '../support/waiting.js';
import { token, tokenIdentity } from './identity-tokens.js';
import type { TestContext } from './identity-tokens.js';

const MAX_BUFFERED = 256 * 1024;
/** Long enough to authenticate, send the refresh and fill the socket's queue before expiry. */
const TTL_MS = 3_000;

let running: RunningGateway<TestContext> | undefined;
afterEach(async () => {
  await running?.gateway.close({ timeoutMs: 0 });
  running = undefined;
});

it('held output and the socket queue together past maxBufferedBytes: closed 1008 while the refresh is checked', async () => {
  const base = tokenIdentity({ refreshAheadMs: 0 });
  const release = deferred<void>();
  let checks = 0;
  running = await startGateway<TestContext>({
    ...base,
    heartbeatIntervalMs: 200,
    limits: { maxBufferedBytes: MAX_BUFFERED, maxBufferedBytesTotal: 0 },
    // TCP carries no token: the hook names the user at the connection, expiring TTL_MS after.
    // The refresh the client sends then waits for the test.
    authenticate: async (request) => {
      if (request.phase === 'upgrade') {
        return {
          user: 'ann',
          expiresAt: Date.now() + TTL_MS,
          topics: undefined,
          methods: undefined,
        };
      }
      checks++;
      await release.promise;
      return base.authenticate!(request);
    },
  });
  const { gateway } = running;
  const { port } = await gateway.listenTcp(0, '127.0.0.1');
  const opened = firstValueFrom(gateway.connected$);
  const socket = netConnect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  const send = (id: number, method: string, params: unknown) =>
    socket.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
  try {
    const session = await opened;
    // A refresh sent in time, checked until the test lets it go.
    send(1, 'rpc.authenticate', { token: token({ user: 'ann', ttl: 120_000 }) });
    await waitUntil(() => checks === 1, 'the refresh check');
    socket.pause(); // reads nothing from here on
    // Fill the socket's queue (past what the kernel takes) to over half the bound.
    const chunk = 'x'.repeat(32 * 1024);
    for (let i = 0; i < 2_000 && session.transport.bufferedAmount < MAX_BUFFERED * 0.6; i++) {
      session.notify('bulk', { i, chunk });
      await sleep(0);
    }
    const queued = session.transport.bufferedAmount;
    expect(queued).toBeGreaterThan(MAX_BUFFERED * 0.6);
    expect(queued).toBeLessThan(MAX_BUFFERED);
    expect(session.expiresAt! > Date.now()).toBe(true);
    // Expired with the refresh still checked: what the session sends from now on is held.
    await sleep(Math.max(0, session.expiresAt! + 100 - Date.now()));
    for (let i = 0; i < 6; i++) session.notify('held', { i, chunk });
    // Held: under the bound alone (it is not closed for that), over it with the socket's queue.
    expect(session.isClosed).toBe(false);
    expect(session.bufferedAmount).toBeGreaterThan(MAX_BUFFERED);
    expect(await within(session.closed, 'the connection to be closed')).toEqual({
      code: 1008,
      reason: 'not reading',
    });
    expect(checks).toBe(1);
  } finally {
    release.resolve();
    socket.destroy();
  }
});
