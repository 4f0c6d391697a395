// The gateway-mode example as docs/gateway-mode.md runs it: demo/gateway-mode/gateway.yaml served
// by the built CLI (`npm run build` first) with Redis and the example's own Python service
// (upstream.py), and a client doing what the example page does: create an order (routed to the
// service, which publishes it through the server API), confirm it (the service calls the client
// back through the server API) and receive both updates on orders.updates.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { firstValueFrom, take, toArray } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { createClient } from '../../src/client/client.js';
import { REDIS_URL } from '../support/brokers.js';
import { freePort, httpGet } from '../support/network.js';
import { killChild } from '../support/processes.js';
import { within } from '../support/waiting.js';

const cli = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const example = fileURLToPath(new URL('../../demo/gateway-mode/', import.meta.url));
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const child of children) await killChild(child);
});

/** Start `command` and resolve with the first stdout line that `ready` accepts. */
function start(
  command: string,
  args: string[],
  env: Record<string, string>,
  ready: (line: string) => boolean,
): Promise<ChildProcess> {
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  children.push(child);
  let output = '';
  child.stderr!.setEncoding('utf8').on('data', (text: string) => (output += text));
  return within(
    new Promise<ChildProcess>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (line) => {
        output += `${line}\n`;
        if (ready(line)) resolve(child);
      });
      child.once('exit', (code) => reject(new Error(`${args[0]} exited (${code}):\n${output}`)));
    }),
    `${args[0]} to start`,
    15_000,
  );
}

describe('the gateway-mode example (demo/gateway-mode)', () => {
  it('creates and confirms an order through the Python service and the server API', async () => {
    const [port, apiPort, ordersPort] = [await freePort(), await freePort(), await freePort()];
    const key = 'example-backend-key-0123456789';
    await start(
      'python3',
      [`${example}upstream.py`],
      {
        PORT: String(ordersPort),
        WSRPC_API_URL: `http://127.0.0.1:${apiPort}/`,
        WSRPC_API_KEY: key,
      },
      () => true,
    );
    await start(
      process.execPath,
      [cli, 'serve', '--config', `${example}gateway.yaml`],
      {
        PORT: String(port),
        API_PORT: String(apiPort),
        REDIS_URL,
        ORDERS_URL: `http://127.0.0.1:${ordersPort}/rpc`,
        BACKEND_API_KEY: key,
        LOG_LEVEL: 'info',
      },
      (line) => line.includes('"msg":"serving"'),
    );
    // The page and the client bundle are served next to the endpoint.
    const page = await httpGet(`http://127.0.0.1:${port}/`);
    expect(page.status).toBe(200);
    expect(page.body).toContain("from '/wsrpc-client.js'");
    expect((await httpGet(`http://127.0.0.1:${port}/wsrpc-client.js`)).status).toBe(200);

    const client = createClient({ url: `ws://127.0.0.1:${port}/rpc`, WebSocket });
    try {
      client.method(
        'confirm',
        (params) => (params as { order: { item: string } }).order.item === 'tea',
      );
      const updates = firstValueFrom(client.subscribe('orders.updates').pipe(take(2), toArray()));
      await new Promise((resolve) => setTimeout(resolve, 300));
      const created = (await client.call('orders.create', { item: 'tea' })) as {
        order: { id: number };
        seq: number;
      };
      expect(created.seq).toEqual(expect.any(Number));
      const confirmed = (await client.call('orders.confirm', { id: created.order.id })) as {
        order: { status: string };
      };
      expect(confirmed.order.status).toBe('confirmed');
      const [first, second] = (await within(updates, 'both updates')) as { status: string }[];
      expect([first!.status, second!.status]).toEqual(['created', 'confirmed']);
    } finally {
      await client.close();
    }
  });
});
