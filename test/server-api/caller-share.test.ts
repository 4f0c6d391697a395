/**
 * One caller's share of the server API's table of calls to clients on other nodes
 * (maxPendingCallsPerCaller): a backend holding its share is refused -32000 at once, naming the
 * share, while another backend's calls (another API key) still reach their clients; its calls
 * answered, the share is back. Two gateways in this process share Redis; the client is on B,
 * the calls go through A's server API.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import { RedisBroker } from '../../src/pubsub/redis-broker.js';
import type { ServerApi } from '../../src/server-api/index.js';
import { REDIS_URL, deleteRedisKeys } from '../support/brokers.js';
import { canConnect } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { waitFor, within } from '../support/waiting.js';
import { API_KEY, asUser, post, startApi, userOptions } from './support.js';

const mustRun = process.env['CI'] === 'true';
const redisUp = await canConnect(6379);
const res = new Resources();
const brokers: Broker[] = [];
const apis: ServerApi[] = [];
const prefix = `wsrpcshare${randomBytes(5).toString('hex')}`;

afterEach(async () => {
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
  await Promise.all(brokers.splice(0).map((broker) => broker.close()));
});

afterAll(async () => {
  await deleteRedisKeys(REDIS_URL, prefix).catch(() => 0);
});

const OTHER_KEY = 'other-backend-0123456789abcdef';
const SHARE = 2;

/**
 * Nodes A and B (their server APIs taking both keys, with `limits`), and a client on B whose
 * method `held` answers "answered" once `release` is called; `held()` counts the calls it got.
 */
async function heldOnB(limits: { maxPendingCalls: number; maxPendingCallsPerCaller: number }) {
  const nodes = [];
  for (let i = 0; i < 2; i++) {
    const broker = await RedisBroker.create({ url: REDIS_URL, prefix: `${prefix}:` });
    brokers.push(broker);
    const running = await res.gateway(userOptions(broker));
    const api = await startApi(running.gateway, { keys: [API_KEY, OTHER_KEY], ...limits });
    apis.push(api);
    nodes.push({ ...running, api });
  }
  const [a, b] = nodes as [(typeof nodes)[0], (typeof nodes)[0]];
  const client = res.client(asUser(b.url, 'bob'));
  let held = 0;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  client.method('held', async () => {
    held++;
    await released;
    return 'answered';
  });
  await client.call('rpc.ping');
  const sessionId = [...b.gateway.sessions.keys()][0]!;
  const callThroughA = (key: string) =>
    post(a.api.url, 'callClient', { sessionId, method: 'held', timeoutMs: 60_000 }, key);
  return { a, release, held: () => held, callThroughA };
}

const answered = { jsonrpc: '2.0', id: 1, result: { result: 'answered' } };

describe.skipIf(!redisUp && !mustRun)("a caller's share of the calls to clients", () => {
  it('past it, that caller is refused -32000 naming maxPendingCallsPerCaller; another key still gets through; answered calls give it back', async () => {
    const { a, release, held, callThroughA } = await heldOnB({
      maxPendingCalls: 8,
      maxPendingCallsPerCaller: SHARE,
    });
    const first = [callThroughA(API_KEY), callThroughA(API_KEY)];
    await waitFor(() => held() === SHARE, 'the first backend to hold its share');
    expect((await callThroughA(API_KEY)).body?.error).toEqual({
      code: -32000,
      message: 'Too many calls to clients in progress for this caller',
      data: { maxPendingCallsPerCaller: SHARE },
    });
    // Other backends' requests are not counted under it, and its own of every method are.
    const other = [callThroughA(OTHER_KEY), callThroughA(OTHER_KEY)];
    await waitFor(() => held() === 2 * SHARE, "the other backend's calls to reach the client");
    expect(
      (await post(a.api.url, 'subscribers', { topic: 'nobody' }, API_KEY)).body?.error,
    ).toMatchObject({ code: -32000, data: { maxPendingCallsPerCaller: SHARE } });

    release();
    for (const reply of await within(Promise.all([...first, ...other]), 'the answers')) {
      expect(reply.body).toEqual(answered);
    }
    // Answered, its share is back.
    expect((await post(a.api.url, 'subscribers', { topic: 'nobody' }, API_KEY)).body).toEqual({
      jsonrpc: '2.0',
      id: 1,
      result: { count: 0, nodes: 2 },
    });
    expect((await callThroughA(API_KEY)).body).toEqual(answered);
  });

  it('the whole table full: every caller is refused -32000 naming maxPendingCalls', async () => {
    const { release, held, callThroughA } = await heldOnB({
      maxPendingCalls: 3,
      maxPendingCallsPerCaller: SHARE,
    });
    const calls = [callThroughA(API_KEY), callThroughA(API_KEY), callThroughA(OTHER_KEY)];
    await waitFor(() => held() === 3, 'the table to fill');
    expect((await callThroughA(OTHER_KEY)).body?.error).toEqual({
      code: -32000,
      message: 'Too many calls to clients in progress',
      data: { maxPendingCalls: 3 },
    });
    release();
    for (const reply of await within(Promise.all(calls), 'the answers')) {
      expect(reply.body).toEqual(answered);
    }
    expect((await callThroughA(OTHER_KEY)).body).toEqual(answered);
  });
});
