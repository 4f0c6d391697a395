/**
 * An upstream reply that is not valid UTF-8 is not a JSON-RPC response: the call is answered
 * -32011 Upstream unavailable (`data.reason` "invalid UTF-8 in the reply"), never with a result
 * whose bad bytes were read as U+FFFD.
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { nanoid } from 'nanoid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NATS_URL } from '../support/brokers.js';
import { openRawSocket } from '../support/gateway.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

/** The reply to request `id`: a result string holding `bad` between "a" and "b". */
function replyWith(id: number, bad: readonly number[]): Buffer {
  return Buffer.concat([
    Buffer.from(`{"jsonrpc":"2.0","id":${id},"result":"a`),
    Buffer.from(bad),
    Buffer.from('b"}'),
  ]);
}

/** The bytes each method's reply holds inside its result string. */
const BYTES: Record<string, readonly number[]> = {
  'up.bad': [0xff],
  'up.surrogate': [0xed, 0xa0, 0x80],
  'up.good': [0xe2, 0x82, 0xac],
};

const subject = `test.upstream.utf8.${nanoid(8)}`;
let upstream: Server;
let responder: NatsConnection;
let running: RoutedGateway;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request = JSON.parse(Buffer.concat(chunks).toString()) as {
        id: number;
        method: string;
      };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(replyWith(request.id, BYTES[request.method.replace(/^\w+/, 'up')]!));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;

  responder = await connect({ servers: NATS_URL });
  const subscription = responder.subscribe(subject);
  void (async () => {
    for await (const msg of subscription) {
      const request = msg.json<{ id: number; method: string }>();
      msg.respond(replyWith(request.id, BYTES[request.method.replace(/^\w+/, 'up')]!));
    }
  })();

  running = await startRoutedGateway({
    upstreams: {
      web: { url: `http://127.0.0.1:${port}/rpc` },
      bus: { nats: { url: NATS_URL, subject } },
    },
    methods: { 'web.*': 'web', 'bus.*': 'bus' },
  });
  await running.routes.ready;
});

afterAll(async () => {
  await running?.close();
  await responder?.close();
  await new Promise((resolve) => upstream?.close(resolve));
});

async function call(method: string): Promise<{
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}> {
  const raw = await openRawSocket(`${running.url}?user=ulla`);
  try {
    raw.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method }));
    return JSON.parse((await raw.waitFor(1))[0]!) as never;
  } finally {
    raw.close();
  }
}

describe.each([
  ['an HTTP upstream', 'web'],
  ['a NATS upstream', 'bus'],
])('%s replying with bytes that are not UTF-8', (_name, upstreamName) => {
  it.each(['bad', 'surrogate'])('is -32011, the reply not decoded (%s)', async (kind) => {
    const reply = await call(`${upstreamName}.${kind}`);
    expect(reply.result).toBeUndefined();
    expect(reply.error).toEqual({
      code: -32011,
      message: 'Upstream unavailable',
      data: { upstream: upstreamName, reason: 'invalid UTF-8 in the reply' },
    });
  });

  it('passes a well-formed multi-byte character through', async () => {
    expect(await call(`${upstreamName}.good`)).toMatchObject({ result: 'a€b' });
  });
});
