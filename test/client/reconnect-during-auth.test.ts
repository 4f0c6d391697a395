/*
 * The server's rpc.reconnect while the client is still authenticating in-band on the connection
 * (rpc.authenticate sent, not yet answered), against a plain `ws` server written by hand. The
 * client is 'open' only on a connection whose handshake (auth included) completed and that it
 * was not asked to leave; such a connection, never open, carries nothing but the token.
 */
import fc from 'fast-check';
import type { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { ClientOptions, ConnectionState, RpcClient } from '../../src/client/index.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { ReservedMethod } from '../../src/protocol/reserved.js';
import { FakeGateways, frameOf, send } from '../support/fake-gateway.js';
import { waitUntil, within } from '../support/waiting.js';

interface Frame {
  id?: number;
  method?: string;
}

/**
 * How the server treats one connection's rpc.authenticate: `reconnect` says whether rpc.reconnect
 * goes in a frame before the answer, in one batch frame right after it (so the client reads both
 * before it acts on the answer), or not at all; `answer` what the answer is (a result, -32601 as
 * a server without in-band auth says, or none at all).
 */
interface Script {
  reconnect: 'before' | 'with' | 'none';
  answer: 'ok' | 'no-method' | 'none';
}

/** One connection as the server sees it. */
interface Conn {
  socket: WebSocket;
  methods: string[];
  /** The answer to rpc.authenticate went out. */
  answered: boolean;
  /** rpc.reconnect went out, no later than the answer: the client may not be 'open' on it. */
  toldToLeave: boolean;
}

const gateways = new FakeGateways({
  getToken: () => 'tok',
  tokenTransport: 'in-band',
  reconnect: { initialDelayMs: 5, maxDelayMs: 20, jitter: 0 },
});
const { clients } = gateways;
afterEach(() => gateways.cleanup());

/** The answer to rpc.authenticate a script gives (ignored when it gives none). */
const answerOf = (script: Script, n: number) =>
  script.answer === 'ok'
    ? { result: { sessionId: `s${n}` } }
    : { error: { code: ErrorCode.MethodNotFound, message: 'Method not found' } };

/**
 * A server that treats the connections as `scripts` say, in order (past their end: answered at
 * once), and answers `echo` with 'echo'.
 */
async function fakeServer(scripts: readonly Script[]) {
  const conns: Conn[] = [];
  const { url } = await gateways.listen((socket) => {
    const script = scripts[conns.length] ?? { reconnect: 'none', answer: 'ok' };
    const conn: Conn = { socket, methods: [], answered: false, toldToLeave: false };
    conns.push(conn);
    const notice = { jsonrpc: '2.0', method: ReservedMethod.Reconnect, params: {} };
    socket.on('message', (data) => {
      const frame = frameOf<Frame>(data);
      if (frame.method) conn.methods.push(frame.method);
      if (frame.id === undefined) return;
      if (frame.method === 'echo') return send(socket, { id: frame.id, result: 'echo' });
      if (frame.method !== ReservedMethod.Authenticate) return;
      conn.toldToLeave = script.reconnect !== 'none';
      if (script.reconnect === 'before') socket.send(JSON.stringify(notice));
      const answer = { jsonrpc: '2.0', id: frame.id, ...answerOf(script, conns.length) };
      conn.answered = script.answer !== 'none';
      const frames = [
        ...(conn.answered ? [answer] : []),
        ...(script.reconnect === 'with' ? [notice] : []),
      ];
      if (frames.length) socket.send(JSON.stringify(frames.length === 1 ? frames[0] : frames));
    });
  });
  return { url, conns };
}

/** Each state the client moves to, and whether an 'open' came on a connection it may not be. */
function watch(client: RpcClient, conns: readonly Conn[]) {
  const states: ConnectionState[] = [];
  const wrongOpens: string[] = [];
  client.state$.subscribe((state) => {
    states.push(state);
    if (state !== 'open') return;
    // The connection the client is on is the last one the server accepted.
    const conn = conns.at(-1);
    if (!conn?.answered) wrongOpens.push(`open before conn ${conns.length} was authenticated`);
    else if (conn.toldToLeave) wrongOpens.push(`open on conn ${conns.length}, told to leave`);
  });
  return { states, wrongOpens };
}

const client = (url: string, options: Partial<ClientOptions> = {}): RpcClient =>
  gateways.client({ url, ...options });

describe('rpc.reconnect while authenticating in-band', () => {
  it('the connection left is never open; a call made meanwhile goes out on the next one', async () => {
    const { url, conns } = await fakeServer([{ reconnect: 'before', answer: 'ok' }]);
    const c = client(url);
    const { states, wrongOpens } = watch(c, conns);
    const echoed = c.call('echo');
    expect(await within(echoed, 'the call')).toBe('echo');
    expect(conns.length).toBe(2);
    expect(conns[0]!.methods).toEqual([ReservedMethod.Authenticate]);
    expect(conns[1]!.methods).toEqual([ReservedMethod.Authenticate, 'echo']);
    expect(wrongOpens).toEqual([]);
    // Never open before, the client is still connecting while it moves.
    expect(states).toEqual(['connecting', 'open']);
  });

  it('holds for any mix of answers and notices over the first connections', async () => {
    const script = fc.record<Script>({
      reconnect: fc.constantFrom('before', 'with', 'none'),
      answer: fc.constantFrom('ok', 'no-method', 'none'),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(script, { minLength: 1, maxLength: 3 }), async (scripts) => {
        const { url, conns } = await fakeServer(scripts);
        // An unanswered rpc.authenticate fails after connectTimeoutMs and is dialled again.
        const c = client(url, { connectTimeoutMs: 100 });
        const { wrongOpens } = watch(c, conns);
        try {
          expect(await within(c.call('echo'), 'the call')).toBe('echo');
          // The connections the server told to leave, or did not let in, never carried the call.
          const carriers = conns.filter((conn) => conn.methods.includes('echo'));
          expect(carriers).toHaveLength(1);
          expect(carriers[0]!.toldToLeave).toBe(false);
          expect(carriers[0]!.answered).toBe(true);
          expect(wrongOpens).toEqual([]);
        } finally {
          await c.close();
          clients.splice(clients.indexOf(c), 1);
        }
      }),
      { numRuns: 20 },
    );
  });

  it('answered and told to leave in one frame: not open on that connection', async () => {
    const { url, conns } = await fakeServer([{ reconnect: 'with', answer: 'ok' }]);
    const c = client(url);
    const { wrongOpens } = watch(c, conns);
    await waitUntil(() => conns.length === 2 && c.state === 'open', 'the second connection');
    expect(wrongOpens).toEqual([]);
    expect(conns[0]!.methods).toEqual([ReservedMethod.Authenticate]);
  });
});
