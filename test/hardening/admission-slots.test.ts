/**
 * Issue 14, finding 3: every admission slot is released on every path, including a client that
 * leaves while an `authenticate` hook decides, on every transport that has admission
 * (WebSocket upgrade, HTTP POST, TCP; stdio has none), whether the hook is sync, async or slow.
 * Each case runs with room for one connection: one leaked slot refuses everyone after it.
 */
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/index.js';
import { HOOK_HANG_RETRY_FACTOR } from '../../src/server/run-authenticate.js';
import { Resources } from '../support/resources.js';
import { deferred } from '../support/promises.js';
import { waitUntil, within } from '../support/waiting.js';
import { connectWhenAdmitted } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** Clients that leave during the hook, per case. */
const ROUNDS = 5;
const CALL = JSON.stringify({ jsonrpc: '2.0', method: 'echo', params: ['hi'], id: 1 });

type HookKind = 'sync' | 'async' | 'slow';

/**
 * An authenticate hook of each kind. `slow` waits until the test says the client has gone
 * (`release`); `async` waits one timer turn, `sync` returns at once.
 */
function hook(kind: HookKind) {
  let calls = 0;
  let gate = deferred();
  let leaving = true;
  return {
    get calls() {
      return calls;
    },
    authenticate: async (): Promise<string> => {
      calls++;
      if (kind === 'async') await new Promise((resolve) => setTimeout(resolve, 1));
      if (kind === 'slow' && leaving) await gate.promise;
      return 'user';
    },
    syncAuthenticate: (): string => {
      calls++;
      return 'user';
    },
    /** Let the waiting slow hook finish (and the next one wait again). */
    release(): void {
      gate.resolve();
      gate = deferred();
    },
    /** The clients that leave are done: the hook answers the ones that stay without waiting. */
    stayers(): void {
      leaving = false;
    },
  };
}

/** Slots held now (the gateway's Admission, which is not public). */
function slotsHeld(gateway: Gateway<string>): number {
  return (gateway as unknown as { admission: { connections: number } }).admission.connections;
}

/** Write `text` on a fresh TCP connection and destroy it as soon as the bytes are written. */
function writeAndLeave(port: number, text: string): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.once('close', () => resolve());
    socket.once('connect', () => {
      if (text === '') socket.destroy();
      else socket.write(text, () => socket.destroy());
    });
  });
}

/** Send one call over TCP; its answer, or the refusal line that came instead. */
function tcpCall(port: number): Promise<{ result?: unknown; error?: { code: number } }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(`${CALL}\n`));
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
      const newline = text.indexOf('\n');
      if (newline < 0) return;
      socket.destroy();
      resolve(JSON.parse(text.slice(0, newline)) as { result?: unknown; error?: { code: number } });
    });
    socket.on('error', reject);
    socket.on('close', () => reject(new Error('closed without a line')));
  });
}

/** POST a call until one is admitted (a slot comes back asynchronously); its status then. */
async function postWhenAdmitted(httpUrl: string): Promise<number> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const response = await fetch(`${httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: CALL,
    });
    await response.arrayBuffer();
    if (response.status !== 503 && response.status !== 429) return response.status;
    if (Date.now() > deadline) throw new Error(`never admitted: ${response.status}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const POST = (body: string) =>
  `POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
const UPGRADE =
  'GET /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
  'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n';

const KINDS: HookKind[] = ['sync', 'async', 'slow'];

describe.each([
  { transport: 'http', leave: POST(CALL) },
  { transport: 'websocket', leave: UPGRADE },
  { transport: 'tcp', leave: '' },
] as const)(
  '$transport: a client that leaves while authenticate decides',
  ({ transport, leave }) => {
    it.each(KINDS)(
      'with a %s hook, frees its slot: the next client is admitted, /readyz is 200, a drain ends',
      async (kind) => {
        const auth = hook(kind);
        const { gateway, port, url, httpUrl } = await res.gateway<string>({
          limits: { maxConnections: 1, maxConnectionsPerIp: 1 },
          authenticate: kind === 'sync' ? auth.syncAuthenticate : auth.authenticate,
        });
        gateway.method('echo', (params) => params);
        const tcpPort = transport === 'tcp' ? (await gateway.listenTcp(0, '127.0.0.1')).port : port;

        for (let round = 1; round <= ROUNDS; round++) {
          const left = writeAndLeave(tcpPort, leave);
          // The client reached the hook (the case is not vacuous)...
          await waitUntil(() => auth.calls >= round, `the hook to see client ${round}`);
          // ...and is gone before a slow hook decides.
          await left;
          if (kind === 'slow') auth.release();
          // Its slot comes back (asynchronously: the hook and the server's close run first).
          await waitUntil(
            () => slotsHeld(gateway) === 0,
            `the slot of client ${round} to be freed`,
          );
        }

        auth.stayers();
        if (transport === 'http') expect(await postWhenAdmitted(httpUrl)).toBe(200);
        if (transport === 'websocket') await connectWhenAdmitted(res, url);
        if (transport === 'tcp') {
          await waitUntil(async () => {
            const reply = await tcpCall(tcpPort).catch(() => undefined);
            return reply?.result !== undefined;
          }, 'a TCP call to be admitted');
        }
        expect(auth.calls).toBeGreaterThan(ROUNDS);
        expect((await fetch(`${httpUrl}/readyz`)).status).toBe(200);
        // A leaked HTTP exchange would hold the drain until its deadline.
        res.sockets.splice(0).forEach((socket) => socket.terminate());
        await within(gateway.drain({ deadlineMs: 60_000 }), 'the drain to end', 20_000);
      },
    );
  },
);

/** One attempt on `transport`: the HTTP status (or, over TCP, the refusal line's data.status). */
async function attempt(
  transport: 'http' | 'websocket' | 'tcp',
  port: number,
  tcpPort: number,
  httpUrl: string,
): Promise<number> {
  if (transport === 'http') {
    const response = await fetch(`${httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: CALL,
    });
    await response.text();
    return response.status;
  }
  if (transport === 'websocket') {
    const answer = await new Promise<string>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => socket.write(UPGRADE));
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (text += chunk));
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(text));
    });
    return Number(/^HTTP\/1\.1 (\d+) /.exec(answer)?.[1]);
  }
  const reply = await tcpCall(tcpPort);
  return (reply.error as { data?: { status?: number } } | undefined)?.data?.status ?? 200;
}

describe('an authenticate hook given up on', () => {
  it.each(['http', 'websocket', 'tcp'] as const)(
    '%s: refused with 503 after authenticateTimeoutMs; its slot is held until the run settles, the next attempt refused 429 without running the hook',
    async (transport) => {
      let calls = 0;
      const runs: (() => void)[] = [];
      const { gateway, port, httpUrl } = await res.gateway<string>({
        limits: { maxConnections: 10, maxConnectionsPerIp: 1, authenticateTimeoutMs: 50 },
        authenticate: () => {
          calls++;
          // An identity provider that answers only when the test says so.
          return new Promise<string>((resolve) => runs.push(() => resolve('user')));
        },
      });
      const tcpPort = transport === 'tcp' ? (await gateway.listenTcp(0, '127.0.0.1')).port : port;
      expect(await attempt(transport, port, tcpPort, httpUrl)).toBe(503);
      expect(calls).toBe(1);
      expect(slotsHeld(gateway)).toBe(1);
      // The address's one slot is the hung run's: refused before the hook is asked again.
      expect(await attempt(transport, port, tcpPort, httpUrl)).toBe(429);
      expect(calls).toBe(1);
      runs.shift()!();
      await waitUntil(() => slotsHeld(gateway) === 0, 'the slot once the run settled');
      // Asked again, and given up on again.
      expect(await attempt(transport, port, tcpPort, httpUrl)).toBe(503);
      expect(calls).toBe(2);
      for (const run of runs.splice(0)) run();
    },
  );

  it('one that never settles holds its slot for HOOK_HANG_RETRY_FACTOR × authenticateTimeoutMs at most', async () => {
    let calls = 0;
    const { gateway, httpUrl } = await res.gateway<string>({
      limits: { maxConnections: 1, maxConnectionsPerIp: 1, authenticateTimeoutMs: 100 },
      authenticate: () => {
        calls++;
        return new Promise<string>(() => undefined); // never answers
      },
    });
    for (let round = 1; round <= 2; round++) {
      const response = await fetch(`${httpUrl}/rpc`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: CALL,
      });
      expect(response.status).toBe(503);
      expect(await response.text()).toBe('Authentication timed out\n');
      expect(calls).toBe(round);
      // Held past the 503 (a tenth of the bound later, still held)...
      expect(slotsHeld(gateway)).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(slotsHeld(gateway)).toBe(1);
      // ...and freed by the time bound alone (1 s here), not by the run.
      await waitUntil(() => slotsHeld(gateway) === 0, `the slot of attempt ${round}`);
    }
    expect(HOOK_HANG_RETRY_FACTOR).toBe(10);
  });
});
