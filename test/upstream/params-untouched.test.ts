// docs/gateway-mode.md, "The envelope": the upstream receives the client's params untouched,
// numbers included. The gateway parses the client's message with JSON.parse, which reads every
// number as a double; params holding a number JSON.stringify would write otherwise (an integer
// past 2^53, 1e400, 1.0) still reach the upstream as the client wrote them, alone or in a batch.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { waitFor } from '../support/waiting.js';
import { clientFrom } from './held-upstream.js';
import { startRoutedGateway } from './routed-gateway.js';

const res = new Resources();
const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  await res.cleanup();
  for (const stop of stops.splice(0)) await stop();
});

/** An upstream answering every request `result: null`, and the bodies it received. */
async function startRecordingUpstream(): Promise<{ bodies: string[]; port: number }> {
  const bodies: string[] = [];
  const server = createServer((req, reply) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      bodies.push(body);
      const { id } = JSON.parse(body) as { id: number };
      reply.writeHead(200, { 'content-type': 'application/json' });
      reply.end(JSON.stringify({ jsonrpc: '2.0', id, result: null }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  stops.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { bodies, port: (server.address() as AddressInfo).port };
}

/** A client of a gateway routing `orders.*` to the upstream on `port`, and its replies. */
async function clientRoutingTo(
  port: number,
): Promise<{ send(text: string): void; replies: string[] }> {
  const running = await startRoutedGateway({
    upstreams: { orders: { url: `http://127.0.0.1:${port}/rpc` } },
    methods: { 'orders.*': 'orders' },
  });
  stops.unshift(() => running.close());
  const client = await clientFrom(res, running.url, '127.0.0.2');
  const replies: string[] = [];
  client.socket.on('message', (data) => replies.push((data as Buffer).toString('utf8')));
  return { send: (text) => client.socket.send(text), replies };
}

/** The params member of a request text, cut out as text. */
function paramsText(body: string): string {
  return /"params":(.*),"id":\d+\}$/.exec(body)![1]!;
}

describe("a routed call's params", () => {
  it('reach the upstream as the client sent them', async () => {
    const { bodies, port } = await startRecordingUpstream();
    const client = await clientRoutingTo(port);
    client.send(
      '{"jsonrpc":"2.0","id":1,"method":"orders.pay","params":{"orderId":12345678901234567890,"amount":1e400}}',
    );
    await waitFor(() => client.replies.length === 1, 'the reply');
    expect(client.replies[0]).toContain('"result":null');
    const sent = JSON.parse(bodies[0]!.replace(/("orderId":)(\d+)/, '$1"$2"')) as {
      params: { orderId: string; amount: unknown };
    };
    expect(bodies[0]).toContain('"orderId":12345678901234567890');
    expect(sent.params.amount).not.toBeNull();
  });

  it('reach the upstream as sent from each member of a batch, the others as JSON.stringify writes them', async () => {
    const { bodies, port } = await startRecordingUpstream();
    const client = await clientRoutingTo(port);
    client.send(
      '[{"jsonrpc":"2.0","id":1,"method":"orders.a","params":[1.0, -0, 1E+2]},' +
        '{"jsonrpc":"2.0","id":2,"method":"orders.b","params": {"n": 1.5}},' +
        '{"jsonrpc":"2.0","method":"orders.c","params":{"big":9007199254740993}}]',
    );
    await waitFor(() => client.replies.length === 1 && bodies.length === 3, 'the replies');
    const byMethod = new Map(
      bodies.map((body) => [/"method":"(orders\.\w)"/.exec(body)![1], body]),
    );
    expect(paramsText(byMethod.get('orders.a')!)).toBe('[1.0, -0, 1E+2]');
    expect(paramsText(byMethod.get('orders.b')!)).toBe('{"n":1.5}');
    expect(byMethod.get('orders.c')).toBe(
      '{"jsonrpc":"2.0","method":"orders.c","params":{"big":9007199254740993}}',
    );
  });
  it('reach the upstream as sent from an HTTP POST exchange', async () => {
    const { bodies, port } = await startRecordingUpstream();
    const running = await startRoutedGateway({
      upstreams: { orders: { url: `http://127.0.0.1:${port}/rpc` } },
      methods: { 'orders.*': 'orders' },
    });
    stops.unshift(() => running.close());
    const reply = await fetch(`${running.httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"jsonrpc":"2.0","id":1,"method":"orders.pay","params":{"cents":-0,"at":1.50}}',
    });
    expect(await reply.text()).toContain('"result":null');
    expect(paramsText(bodies[0]!)).toBe('{"cents":-0,"at":1.50}');
  });
});
