/**
 * An off-the-shelf Ethereum client, ethers v6, used exactly as its docs show
 * (`new WebSocketProvider(url)`, `provider.on('block', listener)`,
 * `provider.off(...)`, `provider.destroy()`), against a gateway configured with
 * the eth_subscribe / eth_subscription / eth_unsubscribe names. Nothing in
 * ethers is patched: the test only listens beside it (its documented "debug"
 * and "error" events, and the raw frames its socket receives) and, on the
 * server, records which methods were dispatched.
 *
 * What ethers 6.17 does here (read from its source and observed on the wire):
 * on open it sends eth_chainId to detect the network; `on('block')` sends
 * eth_subscribe ["newHeads"] and emits "block" with parseInt(result.number)
 * for each eth_subscription notification; removing the last block listener
 * sends eth_unsubscribe [id]; destroy() closes the socket without
 * unsubscribing, so the gateway must release the subscription on disconnect.
 */
import { createHash } from 'node:crypto';
import { WebSocketProvider } from 'ethers';
import type { WebSocket } from 'ws';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';

const CHAIN_ID = '0x1';
const FIRST_BLOCK = 19_000_000;
const WAIT = { timeout: 10_000, interval: 5 };

/** A deterministic 32-byte hash for block `n`. */
function blockHash(n: number): string {
  return `0x${createHash('sha256').update(`block ${n}`).digest('hex')}`;
}

function quantity(n: number): string {
  return `0x${n.toString(16)}`;
}

/** A block header shaped like a geth newHeads notification. */
function header(n: number) {
  return {
    number: quantity(n),
    hash: blockHash(n),
    parentHash: blockHash(n - 1),
    nonce: '0x0000000000000000',
    sha3Uncles: '0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347',
    logsBloom: `0x${'00'.repeat(256)}`,
    transactionsRoot: blockHash(n + 0x1000_0000),
    stateRoot: blockHash(n + 0x2000_0000),
    receiptsRoot: blockHash(n + 0x3000_0000),
    miner: '0x95222290dd7278aa3ddd389cc1e1d165cc4bafe5',
    difficulty: '0x0',
    extraData: '0x',
    gasLimit: quantity(30_000_000),
    gasUsed: quantity(12_345_678 + n - FIRST_BLOCK),
    timestamp: quantity(1_700_000_000 + 12 * (n - FIRST_BLOCK)),
    baseFeePerGas: quantity(7_000_000_000),
  };
}

interface RpcPayload {
  id: number;
  method: string;
  params: unknown[];
}

interface RpcResponse {
  id: number;
  result?: unknown;
  error?: unknown;
}

/** One ethers provider and what the test saw beside it. */
interface Client {
  provider: WebSocketProvider;
  /** Requests ethers wrote, from its "debug" events. */
  sent: RpcPayload[];
  /** Responses ethers read, from its "debug" events. */
  received: RpcResponse[];
  /** Every text frame the socket received, parsed. */
  frames: Record<string, unknown>[];
  /** Errors ethers emitted (e.g. "received unexpected message") or its socket raised. */
  errors: unknown[];
  /** The result of the response to the request with this method, once it has arrived. */
  resultOf(method: string): unknown;
}

let running: RunningGateway | undefined;
const providers: WebSocketProvider[] = [];
/** Method names the gateway dispatched, in order, over every connection. */
let dispatched: string[] = [];

afterEach(async () => {
  try {
    for (const provider of providers.splice(0)) {
      if (!provider.destroyed) await provider.destroy();
    }
  } finally {
    const gateway = running?.gateway;
    running = undefined;
    dispatched = [];
    await gateway?.close({ timeoutMs: 2_000 });
  }
});

async function startEthGateway(): Promise<RunningGateway> {
  running = await startGateway({
    subscriptionMethods: {
      subscribe: 'eth_subscribe',
      notification: 'eth_subscription',
      unsubscribe: 'eth_unsubscribe',
    },
  });
  const { gateway } = running;
  gateway.topic('newHeads');
  gateway.method('eth_chainId', () => CHAIN_ID);
  // Record every method the gateway looks up to dispatch a request (registered or not).
  const lookup = gateway.registry.get.bind(gateway.registry);
  vi.spyOn(gateway.registry, 'get').mockImplementation((name) => {
    dispatched.push(name);
    return lookup(name);
  });
  return running;
}

/** `new WebSocketProvider(url)`, as the ethers docs show, plus passive listeners. */
function connect(url: string): Client {
  const provider = new WebSocketProvider(url);
  providers.push(provider);
  const client: Client = {
    provider,
    sent: [],
    received: [],
    frames: [],
    errors: [],
    resultOf(method) {
      const request = client.sent.find((p) => p.method === method);
      const response = request && client.received.find((r) => r.id === request.id);
      if (!response) throw new Error(`no response to ${method} yet`);
      if (response.error !== undefined) throw new Error(`${method} failed`);
      return response.result;
    },
  };
  // ethers' socket is a `ws` WebSocket in Node; listen beside ethers' own handlers.
  const socket = provider.websocket as unknown as WebSocket;
  socket.on('message', (data) => {
    client.frames.push(JSON.parse((data as Buffer).toString('utf8')) as Record<string, unknown>);
  });
  socket.on('error', (err) => client.errors.push(err));
  void provider.on('debug', (event: { action: string; payload?: unknown; result?: unknown }) => {
    if (event.action === 'sendRpcPayload') client.sent.push(event.payload as RpcPayload);
    if (event.action === 'receiveRpcResult')
      client.received.push(...(event.result as RpcResponse[]));
  });
  void provider.on('error', (err: unknown) => client.errors.push(err));
  return client;
}

/** The eth_subscription frames a client received. */
function notifications(client: Client) {
  return client.frames.filter((f) => f['method'] === 'eth_subscription') as {
    jsonrpc: string;
    method: string;
    params: { subscription: string; seq: number; result: unknown };
  }[];
}

function onlySession(gateway: RunningGateway['gateway']) {
  const sessions = [...gateway.sessions.values()];
  expect(sessions).toHaveLength(1);
  return sessions[0]!;
}

describe('ethers v6 WebSocketProvider against the gateway', () => {
  it('subscribes to newHeads, receives published blocks in order, and unsubscribes with eth_unsubscribe', async () => {
    const { gateway, url } = await startEthGateway();
    const client = connect(url);
    const { provider } = client;

    // Network detection: eth_chainId.
    expect((await provider.getNetwork()).chainId).toBe(1n);

    const blocks: number[] = [];
    const onBlock = (blockNumber: number): void => void blocks.push(blockNumber);
    await provider.on('block', onBlock);

    // Server side: one newHeads subscriber, made through eth_subscribe ["newHeads"].
    await vi.waitFor(() => expect(gateway.pubsub.topics()).toEqual({ newHeads: 1 }), WAIT);
    expect(dispatched).toContain('eth_subscribe');
    expect(gateway.pubsub.subscriptionCount(onlySession(gateway))).toBe(1);
    expect(client.sent.find((p) => p.method === 'eth_subscribe')?.params).toEqual(['newHeads']);
    await vi.waitFor(() => client.resultOf('eth_subscribe'), WAIT);
    const subscriptionId = client.resultOf('eth_subscribe');
    expect(subscriptionId).toMatch(/^0x[0-9a-f]+$/);

    const headers = [0, 1, 2].map((i) => header(FIRST_BLOCK + i));
    const seqs: number[] = [];
    for (const h of headers) seqs.push(await gateway.publish('newHeads', h));

    await vi.waitFor(() => expect(blocks).toHaveLength(3), WAIT);
    expect(blocks).toEqual([FIRST_BLOCK, FIRST_BLOCK + 1, FIRST_BLOCK + 2]);

    // On the wire: the eth_subscription convention, with our extra "seq" member beside it.
    const pushed = notifications(client);
    expect(pushed.map((n) => n.params.result)).toEqual(headers);
    for (const [i, n] of pushed.entries()) {
      expect(n).toEqual({
        jsonrpc: '2.0',
        method: 'eth_subscription',
        params: { subscription: subscriptionId, seq: seqs[i], result: headers[i] },
      });
    }

    // Removing the last block listener makes ethers send eth_unsubscribe [id].
    await provider.off('block', onBlock);
    await vi.waitFor(() => expect(gateway.pubsub.topics()).toEqual({}), WAIT);
    expect(gateway.pubsub.subscriptionCount(onlySession(gateway))).toBe(0);
    await vi.waitFor(() => expect(client.resultOf('eth_unsubscribe')).toBe(true), WAIT);
    expect(client.sent.find((p) => p.method === 'eth_unsubscribe')?.params).toEqual([
      subscriptionId,
    ]);

    // Nothing more is pushed: publish, then a round trip on the same socket.
    await gateway.publish('newHeads', header(FIRST_BLOCK + 3));
    expect(await provider.send('eth_chainId', [])).toBe(CHAIN_ID);
    expect(blocks).toHaveLength(3);
    expect(notifications(client)).toHaveLength(3);

    expect(new Set(dispatched)).toEqual(
      new Set(['eth_chainId', 'eth_subscribe', 'eth_unsubscribe']),
    );
    expect(client.errors).toEqual([]);
  });

  it('releases the subscription when the provider is destroyed without unsubscribing', async () => {
    const { gateway, url } = await startEthGateway();
    const client = connect(url);
    const { provider } = client;
    expect((await provider.getNetwork()).chainId).toBe(1n);

    const blocks: number[] = [];
    await provider.on('block', (blockNumber: number) => void blocks.push(blockNumber));
    await vi.waitFor(() => expect(gateway.pubsub.topics()).toEqual({ newHeads: 1 }), WAIT);

    for (let i = 0; i < 3; i++) await gateway.publish('newHeads', header(FIRST_BLOCK + i));
    await vi.waitFor(() => expect(blocks).toHaveLength(3), WAIT);
    expect(blocks).toEqual([FIRST_BLOCK, FIRST_BLOCK + 1, FIRST_BLOCK + 2]);

    await provider.destroy();
    await vi.waitFor(() => {
      expect(gateway.sessions.size).toBe(0);
      expect(gateway.pubsub.topics()).toEqual({});
    }, WAIT);
    // ethers does not unsubscribe on destroy: the gateway released it on disconnect.
    expect(dispatched).not.toContain('eth_unsubscribe');
    expect(client.errors).toEqual([]);
  });

  it('fans one publish out to two providers and counts each subscriber', async () => {
    const { gateway, url } = await startEthGateway();
    const a = connect(url);
    const b = connect(url);
    const blocksA: number[] = [];
    const blocksB: number[] = [];
    await a.provider.on('block', (n: number) => void blocksA.push(n));
    await b.provider.on('block', (n: number) => void blocksB.push(n));
    await vi.waitFor(() => expect(gateway.pubsub.topics()).toEqual({ newHeads: 2 }), WAIT);

    for (let i = 0; i < 3; i++) await gateway.publish('newHeads', header(FIRST_BLOCK + i));
    const expected = [FIRST_BLOCK, FIRST_BLOCK + 1, FIRST_BLOCK + 2];
    await vi.waitFor(() => {
      expect(blocksA).toEqual(expected);
      expect(blocksB).toEqual(expected);
    }, WAIT);

    await a.provider.destroy();
    await vi.waitFor(() => expect(gateway.pubsub.topics()).toEqual({ newHeads: 1 }), WAIT);
    await b.provider.removeAllListeners('block');
    await vi.waitFor(() => expect(gateway.pubsub.topics()).toEqual({}), WAIT);
    // The reply has reached ethers too: destroying it in afterEach cancels no request in flight
    // (ethers would reject that one where nobody listens).
    await vi.waitFor(() => expect(b.resultOf('eth_unsubscribe')).toBe(true), WAIT);
    expect(a.errors).toEqual([]);
    expect(b.errors).toEqual([]);
  });
});
