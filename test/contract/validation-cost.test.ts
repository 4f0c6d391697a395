/**
 * A contract's params validation that fails in many places costs the connection's input budget
 * for its issues (ISSUES_PER_CHARGED_MESSAGE of them a message's worth), not only the request's
 * bytes: a schema library works per bad value, so a flood of requests failing everywhere would
 * otherwise take many times the CPU its bytes paid for. Counted as the transport hands messages
 * to the session, with a budget that does not refill within the test (1 byte a second).
 */
import { afterEach, describe, expect, it } from 'vitest';
import type WebSocket from 'ws';
import { z } from 'zod';
import { defineContract } from '../../src/contract/contract.js';
import { ISSUES_PER_CHARGED_MESSAGE, implementContract } from '../../src/server/contract-server.js';
import type { Session } from '../../src/server/session.js';
import { DEFAULT_MESSAGE_COST_BYTES } from '../../src/transport/ws-transport.js';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import { countHandled, newSession, sessionIds } from '../support/gateway.js';
import { Resources } from '../support/resources.js';
import { openSocket } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

const MAX_MESSAGE_BYTES = 64 * 1024;
/** The burst is 2 × maxMessageBytes. */
const BURST = 2 * MAX_MESSAGE_BYTES;
const ITEMS = 1_000;

const contract = defineContract({
  name: 'cost',
  version: '1.0.0',
  methods: { sum: { params: z.object({ values: z.array(z.number()) }), result: z.number() } },
});

async function costGateway() {
  const running = await res.gateway({
    heartbeatIntervalMs: 0,
    limits: { maxMessageBytes: MAX_MESSAGE_BYTES, bytesPerSecond: 1, bytesPerSecondPerIp: 0 },
  });
  implementContract(running.gateway, contract, {
    methods: { sum: ({ values }) => values.reduce((a, b) => a + b, 0) },
  });
  return running;
}

/** A connection, and the count of messages its session was handed. */
async function connection(running: Awaited<ReturnType<typeof costGateway>>) {
  const before = sessionIds(running.gateway);
  const socket: WebSocket = await openSocket(res, running.url);
  const session: Session = newSession(running.gateway, before);
  const transport = session.transport as WsTransport;
  const handled = countHandled(transport);
  return { socket, transport, handled };
}

const request = (id: number, item: unknown) =>
  JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'sum',
    params: { values: Array<unknown>(ITEMS).fill(item) },
  });

describe('contract validation failures and the input budget', () => {
  it('a request failing on every item costs its issues: reading pauses after the burst pays for them', async () => {
    const running = await costGateway();
    const { socket, transport, handled } = await connection(running);
    const bad = request(1, '');
    // Each costs its bytes (the frame), then ITEMS / ISSUES_PER_CHARGED_MESSAGE floors.
    const cost = bad.length + (ITEMS / ISSUES_PER_CHARGED_MESSAGE) * DEFAULT_MESSAGE_COST_BYTES;
    const paid = Math.ceil(BURST / cost);
    for (let i = 0; i < 40; i++) socket.send(bad);
    await waitUntil(() => transport.inputPaused, 'reading to pause');
    expect(handled.count).toBeLessThanOrEqual(paid + 1);
    expect(handled.count).toBeLessThan(40);
  });

  it('valid requests of the same size cost only their bytes: all of them are handled', async () => {
    const running = await costGateway();
    const { socket, transport, handled } = await connection(running);
    const good = request(1, 1);
    const count = Math.floor(BURST / (good.length + 1)) - 1;
    const answers: string[] = [];
    socket.on('message', (data) => answers.push((data as Buffer).toString('utf8')));
    for (let i = 0; i < count; i++) socket.send(good);
    await waitUntil(() => answers.length === count, 'every answer');
    expect(handled.count).toBe(count);
    expect(transport.inputPaused).toBe(false);
  });
});
