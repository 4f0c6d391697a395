/**
 * The CLI printing a large answer nested deep, as a child process with a small heap: indented,
 * each element of an array nested 60 deep would be written on a line of its own after 120
 * spaces, 60 times the answer's size, so past the bound (64 MiB of indented text) it is printed
 * compact, on one line, and the CLI holds a small multiple of the answer.
 */
import type { AddressInfo } from 'node:net';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { CliResources, ensureCliBuilt } from './cli-harness.js';

const resources = new CliResources();
const servers: WebSocketServer[] = [];

beforeAll(() => ensureCliBuilt(), 180_000);
afterEach(async () => {
  await resources.cleanup();
  for (const server of servers.splice(0)) {
    for (const client of server.clients) client.terminate();
    await new Promise((resolve) => server.close(resolve));
  }
});

const MiB = 1024 * 1024;

/** A `ws` server answering every call with `result` (JSON text); its ws:// URL. */
async function answering(result: string): Promise<string> {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  servers.push(server);
  await new Promise((resolve) => server.once('listening', resolve));
  server.on('connection', (socket) => {
    socket.on('error', () => undefined);
    socket.on('message', (data: Buffer) => {
      const { id } = JSON.parse(data.toString('utf8')) as { id: unknown };
      socket.send(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${result}}`);
    });
  });
  return `ws://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/** `[[...[0,0,...,0]...]]`: `bytes` of zeros and commas nested `depth` deep. */
function deepArray(bytes: number, depth: number): string {
  return `${'['.repeat(depth)}${'0,'.repeat(bytes / 2)}0${']'.repeat(depth)}`;
}

describe('wsrpc call: a large answer nested deep', () => {
  it('4 MiB nested 60 deep is printed exactly (compact) with a 128 MiB heap, exit 0', async () => {
    // Indented it would be some 250 MiB of text: the heap could not hold it.
    const result = deepArray(4 * MiB, 60);
    const url = await answering(result);
    const run = await resources.run(['call', url, 'deep', '--timeout', '60000'], {
      NODE_OPTIONS: '--max-old-space-size=128',
    });
    expect({ code: run.code, stderr: run.stderr.slice(0, 300) }).toEqual({ code: 0, stderr: '' });
    expect(run.stdout).toBe(`${result}\n`);
  }, 60_000);

  it('an answer whose indented text stays within the bound is still indented', async () => {
    const url = await answering(deepArray(1024, 10));
    const run = await resources.run(['call', url, 'deep']);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`${JSON.stringify(JSON.parse(deepArray(1024, 10)), null, 2)}\n`);
  });
});
