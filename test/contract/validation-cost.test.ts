/**
 * A contract's params validation costs the connection's input budget its time
 * (VALIDATION_BYTES_PER_MS a millisecond), passing or failing, sync or async, on top of the
 * request's bytes: a schema's work does not follow the params' bytes (a union tries each option
 * on every item and folds thousands of failures into one issue), so a flood of costly requests
 * must be paused as a flood of bytes is. The schemas here burn at least a known time, so the
 * least each validation is charged is known; nothing depends on how fast the machine is. Counted
 * as the transport hands messages to the session, with a budget that does not refill within the
 * test (1 byte a second).
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineContract } from '../../src/contract/contract.js';
import { VALIDATION_BYTES_PER_MS, implementContract } from '../../src/server/contract-server.js';
import type { Session } from '../../src/server/session.js';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import { countHandled, newSession, sessionIds } from '../support/gateway.js';
import { Resources } from '../support/resources.js';
import type { RawRpc } from '../support/raw-rpc.js';
import { openRaw } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';
import { openStream, post } from '../sse/sse-raw.js';

const res = new Resources();
afterEach(() => res.cleanup());

const MAX_MESSAGE_BYTES = 64 * 1024;
/** The burst is 2 × maxMessageBytes. */
const BURST = 2 * MAX_MESSAGE_BYTES;
/** What each validation takes at least: its charge alone is over a third of the burst. */
const BURN_MS = 5;
/** At most this many such validations run before the budget is spent and reading pauses. */
const PAID = Math.ceil(BURST / (BURN_MS * VALIDATION_BYTES_PER_MS));

/** Keep the thread busy for at least `ms`: a validation of known least cost. */
function burn(ms: number): void {
  const start = performance.now();
  while (performance.now() - start < ms) {
    // busy: what a costly schema does
  }
}

type Outcome = 'pass' | 'fail';

/** The result a schema gives after its work: the value, or one issue for however much failed. */
function resultOf(value: unknown, outcome: Outcome): StandardSchemaV1.Result<unknown> {
  return outcome === 'pass' ? { value } : { issues: [{ message: 'No option matched' }] };
}

/** A Standard Schema whose validation burns BURN_MS, synchronously or in a later task. */
function costly(outcome: Outcome, mode: 'sync' | 'async'): StandardSchemaV1<unknown> {
  return {
    '~standard': {
      version: 1,
      vendor: 'test',
      validate: (value) => {
        if (mode === 'sync') {
          burn(BURN_MS);
          return resultOf(value, outcome);
        }
        return new Promise((resolve) =>
          setImmediate(() => {
            burn(BURN_MS);
            resolve(resultOf(value, outcome));
          }),
        );
      },
    },
  };
}

/** A Standard Schema that only waits WAIT_MS (a lookup of its own), then passes. */
const WAIT_MS = 20;
const waiting: StandardSchemaV1<unknown> = {
  '~standard': {
    version: 1,
    vendor: 'test',
    validate: (value) => new Promise((resolve) => setTimeout(() => resolve({ value }), WAIT_MS)),
  },
};

const contract = defineContract({
  name: 'cost',
  version: '1.0.0',
  methods: {
    passes: { params: costly('pass', 'sync'), result: z.number() },
    fails: { params: costly('fail', 'sync'), result: z.number() },
    passesLater: { params: costly('pass', 'async'), result: z.number() },
    waits: { params: waiting, result: z.number() },
  },
});

async function costGateway() {
  const running = await res.gateway({
    heartbeatIntervalMs: 0,
    limits: { maxMessageBytes: MAX_MESSAGE_BYTES, bytesPerSecond: 1, bytesPerSecondPerIp: 0 },
  });
  implementContract(running.gateway, contract, {
    methods: { passes: () => 1, fails: () => 1, passesLater: () => 1, waits: () => 1 },
  });
  return running;
}

/** A connection, and the count of messages its session was handed. */
async function connection(running: Awaited<ReturnType<typeof costGateway>>) {
  const before = sessionIds(running.gateway);
  const rpc = await openRaw(res, running.url);
  const session: Session = newSession(running.gateway, before);
  const transport = session.transport as WsTransport;
  const handled = countHandled(transport);
  return { rpc, transport, handled };
}

/**
 * Call `method` one request at a time until reading pauses: how many were answered. Each
 * validation is charged before its answer is sent, so the pause is there once the answer is.
 */
async function callsUntilPaused(rpc: RawRpc, transport: WsTransport, method: string) {
  let answered = 0;
  while (!transport.inputPaused) {
    // Past what the burst can pay for, the validations were not charged.
    expect(answered).toBeLessThan(PAID);
    await rpc.request(method, { n: answered });
    answered++;
  }
  return answered;
}

describe('contract validation and the input budget', () => {
  it.each([
    ['a passing validation', 'passes'],
    ['a failing validation with a single issue', 'fails'],
    ['an async validation, up to its settling', 'passesLater'],
  ])('%s costs its time: reading pauses once the burst has paid for a few', async (_, method) => {
    const running = await costGateway();
    const { rpc, transport, handled } = await connection(running);
    // Each request's bytes are a few dozen, and its least cost 256: they alone would leave
    // nearly all of the burst.
    expect(PAID * 256).toBeLessThan(BURST / 100);
    const answered = await callsUntilPaused(rpc, transport, method);
    expect(answered).toBeGreaterThanOrEqual(1);
    expect(handled.count).toBe(answered);
  });

  it('an async validation that only waits costs its own work, not the wait', async () => {
    const running = await costGateway();
    const { rpc, transport, handled } = await connection(running);
    // Charged for its wall time, each would cost more than the whole burst.
    expect(WAIT_MS * VALIDATION_BYTES_PER_MS).toBeGreaterThan(BURST);
    for (let n = 0; n < 5; n++) expect((await rpc.request('waits', { n })).result).toBe(1);
    expect(transport.inputPaused).toBe(false);
    expect(handled.count).toBe(5);
  });

  it("a costly sender's further requests wait; another connection is answered meanwhile", async () => {
    const running = await costGateway();
    const { rpc, transport, handled } = await connection(running);
    const answered = await callsUntilPaused(rpc, transport, 'fails');
    // Sent while reading is paused: it stays unread, in the socket, for as long as the debt.
    const id = rpc.nextId();
    rpc.send({ jsonrpc: '2.0', id, method: 'rpc.ping' });

    const bystander = await openRaw(res, running.url);
    expect((await bystander.request('rpc.ping')).result).toBe('pong');
    expect((await bystander.request('fails', { n: 0 })).error).toMatchObject({ code: -32602 });

    // The budget does not refill in this test: the sender's ping is still waiting, unhandled.
    expect(handled.count).toBe(answered);
    expect(transport.inputPaused).toBe(true);
    expect(rpc.frames.some((frame) => frame.id === id)).toBe(false);
  });

  it('on a TCP connection too: reading pauses once the burst has paid for a few', async () => {
    const { gateway } = await costGateway();
    const { port } = await gateway.listenTcp(0, '127.0.0.1');
    const socket: Socket = connect(port, '127.0.0.1');
    res.netSockets.push(socket);
    await new Promise((resolve) => socket.once('connect', resolve));
    await waitUntil(() => gateway.sessions.size === 1, 'the session');
    const session = [...gateway.sessions.values()][0]!;
    const readable = (session.transport as unknown as { readable: Socket }).readable;
    let text = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
    let answered = 0;
    while (!readable.isPaused()) {
      expect(answered).toBeLessThan(PAID);
      const line = { jsonrpc: '2.0', id: answered, method: 'passes', params: { n: answered } };
      socket.write(`${JSON.stringify(line)}\n`);
      await waitUntil(() => new RegExp(`"id":${answered}[,}]`).test(text), `answer ${answered}`);
      answered++;
    }
    expect(answered).toBeGreaterThanOrEqual(1);
  });
});

describe('contract validation and the address budget over HTTP', () => {
  async function httpGateway() {
    const running = await res.gateway({
      heartbeatIntervalMs: 0,
      routes: { events: '/rpc/events' },
      limits: {
        maxMessageBytes: MAX_MESSAGE_BYTES,
        bytesPerSecondPerIp: 1,
        ratePerSecond: 0,
      },
    });
    implementContract(running.gateway, contract, {
      methods: { passes: () => 1, fails: () => 1, passesLater: () => 1, waits: () => 1 },
    });
    return running;
  }

  function postRpc(httpUrl: string, id: number, method: string) {
    return fetch(`${httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { n: id } }),
    });
  }

  it.each([['passes'], ['fails'], ['passesLater']])(
    'POST /rpc: %s costs its time, and the address is refused 429 once the burst has paid for a few',
    async (method) => {
      const { httpUrl } = await httpGateway();
      // Charged for their bytes alone, the burst would answer hundreds of these.
      let answered = 0;
      for (;;) {
        const response = await postRpc(httpUrl, answered, method);
        await response.text();
        if (response.status === 429) break;
        expect(response.status).toBe(200);
        answered++;
        expect(answered).toBeLessThanOrEqual(PAID);
      }
      expect(answered).toBeGreaterThanOrEqual(1);
    },
  );

  it("the streaming fallback's validations cost the address's budget: POST /rpc is then refused", async () => {
    const { httpUrl } = await httpGateway();
    const events = `${httpUrl}/rpc/events`;
    const stream = await openStream(events);
    // At most PAID validations take the burst into debt (each is charged at least BURN_MS, more
    // on a busy machine); their bodies alone are a few hundred bytes. The next of the stream's
    // POSTs would wait for the refill (1 byte a second): one goes only while POST /rpc is not
    // refused, so none is sent into the debt.
    let validated = 0;
    for (;;) {
      const probe = await postRpc(httpUrl, 1_000 + validated, 'rpc.ping');
      await probe.text();
      if (probe.status === 429) break;
      expect(probe.status).toBe(200);
      expect(validated).toBeLessThan(PAID);
      const id = ++validated;
      const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'fails', params: { n: id } });
      expect((await post(events, stream.session, body)).status).toBe(202);
      const answer = new RegExp(`"id":${id}[,}]`);
      await stream.until((got) => got.some((e) => answer.test(e.data)), 10_000);
    }
    expect(validated).toBeGreaterThanOrEqual(1);
    stream.destroy();
  });
});
