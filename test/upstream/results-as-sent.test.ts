/**
 * A routed call's result reaches the client as its upstream wrote it: a Python upstream, whose
 * integers are exact at any size, answers with numbers a JavaScript double does not hold
 * (18446744073709551618, -0.0, 1.50): the client's reply carries those texts, not
 * JSON.stringify's rewrite of the parsed value. A result that holds only numbers that
 * round-trip is written as before; one a middleware changed is written as it is now.
 */
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Middleware } from '../../src/peer/middleware.js';
import type { Session } from '../../src/server/session.js';
import { startPythonUpstream } from '../support/python-upstream.js';
import type { PythonUpstream } from '../support/python-upstream.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway, TestContext } from './routed-gateway.js';

let upstream: PythonUpstream;
const gateways: RoutedGateway[] = [];

beforeAll(async () => {
  upstream = await startPythonUpstream();
});

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.close()));
  await upstream.stop();
});

type GatewayMiddleware = Middleware<Session<TestContext | undefined>>;

async function gateway(middleware?: GatewayMiddleware[]): Promise<RoutedGateway> {
  const running = await startRoutedGateway(
    { upstreams: { orders: { url: upstream.url } }, methods: { 'orders.*': 'orders' } },
    middleware ? { middleware } : {},
  );
  gateways.push(running);
  return running;
}

/** The text of the reply to one request sent as `text` over a plain WebSocket. */
async function replyText(url: string, text: string): Promise<string> {
  const socket = new WebSocket(url);
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  const reply = new Promise<string>((resolve) =>
    socket.once('message', (data: Buffer) => resolve(data.toString())),
  );
  socket.send(text);
  try {
    return await reply;
  } finally {
    socket.close();
  }
}

const ledger = (params: string) =>
  `{"jsonrpc":"2.0","id":1,"method":"orders.ledger","params":${params}}`;

describe('a routed result, as its upstream wrote it', () => {
  it('keeps the numbers a double does not hold exactly', async () => {
    const { url } = await gateway();
    const reply = await replyText(
      url,
      ledger('{"account":18446744073709551617,"rate":1.50,"negativeZero":true}'),
    );
    // Python writes 1.50 as 1.5 and -0.0 as -0.0: what it wrote is what arrives.
    expect(reply).toBe(
      '{"jsonrpc":"2.0","result":{"account": 18446744073709551617, "next": 18446744073709551618, "rate": 1.5, "zero": -0.0},"id":1}',
    );
  });

  it('writes a result of numbers that round-trip as any other', async () => {
    const { url } = await gateway();
    const reply = await replyText(url, ledger('{"account":41,"rate":0.25}'));
    expect(reply).toBe('{"jsonrpc":"2.0","result":{"account":41,"next":42,"rate":0.25},"id":1}');
  });

  it('writes a result a middleware changed as it is now', async () => {
    const addNote: GatewayMiddleware = async (_ctx, next) => {
      const result = (await next()) as Record<string, unknown>;
      return { ...result, note: 'seen' };
    };
    const { url } = await gateway([addNote]);
    const reply = await replyText(url, ledger('{"account":18446744073709551617}'));
    expect(JSON.parse(reply)).toMatchObject({
      result: { note: 'seen', next: 18446744073709552000 },
    });
    expect(reply).toContain('"next":18446744073709552000');
  });
});
