/**
 * The recipes in docs/recipes run as written: each page's `server.ts` block is bundled against
 * this source tree (`wsrpc-gateway` is src/index.ts; express, fastify and the rest are the
 * installed packages; NestJS's decorators as its page asks) and run as a process, then used as its page says: the app's routes, 404
 * and error handler, the gateway's WebSocket, POST and health routes, many requests in a row,
 * and SIGTERM, after which the process exits 0 by itself.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { root, spawnServer } from '../support/demo-process.js';
import { Resources } from '../support/resources.js';
import { freePort } from '../support/network.js';
import { waitForState } from '../support/client.js';
import {
  buildForNode,
  recipeDir,
  recipeTypeErrors,
  waitForRecipeServer,
} from '../support/recipes.js';

const res = new Resources();
afterEach(() => res.cleanup());

const outDir = recipeDir('recipes');

/** The page's first TypeScript block, bundled into a runnable file. */
async function bundleRecipe(page: string): Promise<string> {
  const markdown = readFileSync(join(root, 'docs', 'recipes', page), 'utf8');
  const code = /```ts\n([\s\S]*?)```/.exec(markdown)?.[1];
  if (!code) throw new Error(`no ts block in docs/recipes/${page}`);
  mkdirSync(outDir, { recursive: true });
  const source = join(outDir, page.replace(/\.md$/, '.ts'));
  writeFileSync(source, code);
  const outfile = join(outDir, page.replace(/\.md$/, '.mjs'));
  await buildForNode(source, outfile, { experimentalDecorators: page === 'nestjs.md' });
  return outfile;
}

interface Answer {
  status: number;
  body: string;
}

function send(port: number, path: string, body?: string, agent?: Agent): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        agent,
        method: body === undefined ? 'GET' : 'POST',
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('error', reject);
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const sum = (a: number, b: number, id = 1) =>
  JSON.stringify({ jsonrpc: '2.0', method: 'sum', params: [a, b], id });

describe.each(['express.md', 'fastify.md', 'nestjs.md'])('docs/recipes/%s', (page) => {
  it('runs as written: the app and the gateway on one port, and SIGTERM exits 0', async () => {
    const file = await bundleRecipe(page);
    const port = await freePort();
    const { child, output, exited } = spawnServer(file, port);
    res.children.push(child);
    await waitForRecipeServer(port, () => child.exitCode !== null, output);

    // The app.
    expect(await send(port, '/api/hello')).toEqual({ status: 200, body: '{"hello":"world"}' });
    expect(await send(port, '/nope')).toEqual({
      status: 404,
      body: '{"error":"no such route","path":"/nope"}',
    });
    expect(await send(port, '/api/boom')).toEqual({ status: 500, body: '{"error":"boom"}' });
    // The gateway.
    const client = res.client(`ws://127.0.0.1:${port}/rpc`);
    expect(await client.call('sum', [1, 2])).toBe(3);
    expect(await send(port, '/rpc', sum(2, 3))).toEqual({
      status: 200,
      body: '{"jsonrpc":"2.0","result":5,"id":1}',
    });
    const ready = await send(port, '/readyz');
    expect(ready).toEqual({ status: 200, body: '{"status":"ready","sessions":1}' });
    expect((await send(port, '/metrics')).body).toContain(
      'rpc_connections{transport="websocket"} 1',
    );
    // Both, many times over one kept-alive connection.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; i < 25; i++) {
        expect((await send(port, '/api/hello', undefined, agent)).status).toBe(200);
        expect((await send(port, '/livez', undefined, agent)).status).toBe(200);
        expect((await send(port, `/missing/${i}`, undefined, agent)).status).toBe(404);
        expect(await send(port, '/rpc', sum(i, 1, i), agent)).toEqual({
          status: 200,
          body: `{"jsonrpc":"2.0","result":${i + 1},"id":${i}}`,
        });
      }
    } finally {
      agent.destroy();
    }

    expect(child.kill('SIGTERM')).toBe(true);
    const { code, signal } = await exited;
    expect({ code, signal, output: code === 0 ? '' : output() }).toEqual({
      code: 0,
      signal: null,
      output: '',
    });
    // The client was told to reconnect (the drain's notice), and is trying to.
    await waitForState(client, 'reconnecting');
  });
});

describe('docs/recipes/nestjs.md', () => {
  it('type-checks with the decorators its page asks for', async () => {
    await bundleRecipe('nestjs.md'); // writes server.ts beside the bundle
    const errors = recipeTypeErrors(outDir, ['nestjs.ts'], { experimentalDecorators: true });
    expect(errors).toEqual([]);
  }, 180_000);
});
