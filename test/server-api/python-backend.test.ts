/**
 * The server API from another language: the Python upstream (test/support/python/upstream.py,
 * standard library only, a child process) publishes through it (the seq it gets back is the one
 * the subscriber sees; a publish retried twice with its key lands once) and calls a browser-like
 * client (a Node client with a handler), which answers.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ServerApi } from '../../src/server-api/index.js';
import { startPythonUpstream } from '../support/python-upstream.js';
import type { PythonUpstream } from '../support/python-upstream.js';
import { Resources } from '../support/resources.js';
import { waitFor } from '../support/waiting.js';
import { API_KEY, asUser, call, startApi, userOptions } from './support.js';

const res = new Resources();
const apis: ServerApi[] = [];
const pythons: PythonUpstream[] = [];

afterEach(async () => {
  await Promise.all(pythons.splice(0).map((python) => python.stop()));
  await Promise.all(apis.splice(0).map((api) => api.close()));
  await res.cleanup();
});

async function setup() {
  const running = await res.gateway(userOptions());
  running.gateway.topic('orders.*');
  const api = await startApi(running.gateway);
  apis.push(api);
  const python = await startPythonUpstream({
    env: { WSRPC_API_URL: api.url, WSRPC_API_KEY: API_KEY },
  });
  pythons.push(python);
  return { ...running, api, python };
}

describe('server API called by a Python backend', () => {
  it('publishes with seqs, and a keyed publish retried twice lands once', async () => {
    const { url, api, python } = await setup();
    const client = res.client(url);
    const seen: { seq: number; data: unknown }[] = [];
    client
      .subscribeWithMeta('orders.17')
      .subscribe((event) => seen.push({ seq: event.seq!, data: event.data }));
    await waitFor(
      async () =>
        (await call<{ count: number }>(api.url, 'subscribers', { topic: 'orders.17' })).count === 1,
      'the subscription',
    );
    expect(
      await python.rpc('orders.publish', { topic: 'orders.17', data: { status: 'new' } }),
    ).toEqual({
      seq: 1,
      duplicate: false,
    });
    const keyed = { topic: 'orders.17', data: { status: 'paid' }, key: 'order-17-paid' };
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await python.rpc('orders.publish', keyed));
    expect(answers).toEqual([
      { seq: 2, duplicate: false },
      { seq: 2, duplicate: true },
      { seq: 2, duplicate: true },
    ]);
    expect(
      await python.rpc('orders.publish', { topic: 'orders.17', data: { status: 'sent' } }),
    ).toEqual({
      seq: 3,
      duplicate: false,
    });
    await waitFor(() => seen.length === 3, 'three messages');
    expect(seen).toEqual([
      { seq: 1, data: { status: 'new' } },
      { seq: 2, data: { status: 'paid' } },
      { seq: 3, data: { status: 'sent' } },
    ]);
  });

  it('calls a connected client and gets its answer', async () => {
    const { url, gateway, python } = await setup();
    const client = res.client(asUser(url, 'ann'));
    client.method('ask', (params: { question: string }) => ({
      answer: `yes to ${params.question}`,
    }));
    await client.call('rpc.ping');
    const sessionId = [...gateway.sessions.keys()][0]!;
    expect(await python.rpc('orders.ask', { sessionId, question: 'ship it?' })).toEqual({
      result: { answer: 'yes to ship it?' },
    });
  });
});
