import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, mainJs, waitForLivez, spawnServer } from '../support/demo-process.js';
import { AskClient, ClientConfirm, Subtract } from '../../demo/service.js';
import { Resources } from '../support/resources.js';
import { freePort } from '../support/network.js';
import { recordStates, waitForState } from '../support/client.js';

const res = new Resources();
afterEach(() => res.cleanup());

beforeAll(ensureBuilt, 120_000);

describe('the demo process (dist/demo/main.js)', () => {
  it('serves calls on PORT and drains and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const httpUrl = `http://127.0.0.1:${port}`;
    const { child, output, exited } = spawnServer(mainJs, port);
    res.children.push(child);

    await waitForLivez(child, httpUrl);
    const ready = await fetch(`${httpUrl}/readyz`);
    expect(ready.status).toBe(200);
    await ready.arrayBuffer();

    const client = res.client(`ws://127.0.0.1:${port}/rpc`);
    client.method(ClientConfirm, ({ question }) => `yes to ${question}`);
    const { states } = recordStates(client);
    expect(await client.call(Subtract, [42, 23])).toBe(19);
    expect(await client.call(Subtract, { minuend: 42, subtrahend: 23 })).toBe(19);
    expect(await client.call(AskClient, { question: 'go?' })).toEqual({
      question: 'go?',
      answer: 'yes to go?',
    });

    const raw = await res.raw(`ws://127.0.0.1:${port}/rpc`);
    raw.socket.send('{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}');
    const [reply] = await raw.waitFor(1);
    expect(reply).toBe('{"jsonrpc":"2.0","result":19,"id":1}');

    expect(child.kill('SIGTERM')).toBe(true);
    const { code, signal } = await exited;
    expect({ code, signal, output: code === 0 ? '' : output() }).toEqual({
      code: 0,
      signal: null,
      output: '',
    });
    // The client was told the server is going away and is now trying to come back.
    await waitForState(client, 'reconnecting');
    expect(states).toEqual(['connecting', 'open', 'reconnecting']);
  });
});
