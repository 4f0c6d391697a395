// SIGHUP (a closed terminal, an ended session) drains as SIGTERM does, for `wsrpc-gateway serve`
// and the demo: a connected client is told to reconnect and closed with 1012, and the process
// exits 0, instead of dying at once (exit 129, the client cut off with 1006). The built CLI and
// demo (`npm run build` first), in child processes.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { exitOf, mainJs, root } from '../support/demo-process.js';
import { killChild } from '../support/processes.js';
import { closeOf } from '../support/sockets.js';
import { within } from '../support/waiting.js';

const cli = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'serve-sighup-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** `args` under node with LOG_LEVEL info; resolves with the child and the first URL it logs. */
async function started(
  args: string[],
  urlPattern: RegExp,
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'info', HOST: '127.0.0.1', PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  cleanups.push(() => killChild(child));
  const url = new Promise<string>((resolve) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const found = urlPattern.exec(line);
      if (found) resolve(found[1]!);
    });
  });
  return { child, url: await within(url, `${args.join(' ')} to log its URL`, 20_000) };
}

/** A WebSocket client connected to `url`, and its close (awaited from the start). */
async function connected(url: string): Promise<{ closed: Promise<{ code: number }> }> {
  const socket = new WebSocket(url);
  cleanups.push(() => Promise.resolve(socket.terminate()));
  const closed = closeOf(socket);
  await within(
    new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject)),
    'the client to connect',
  );
  return { closed };
}

it('serve: SIGHUP drains (the client closed with 1012) and exits 0', async () => {
  const config = join(dir, 'gateway.yaml');
  writeFileSync(
    config,
    'listen: { host: 127.0.0.1, port: 0 }\nshutdown: { drainDeadlineMs: 3000 }\n',
  );
  const { child, url } = await started(
    [cli, 'serve', '--config', config],
    /"url":"(ws:\/\/[^"]+)"/,
  );
  const { closed } = await connected(url);
  const exited = exitOf(child);
  child.kill('SIGHUP');
  expect((await within(closed, 'the client to be closed')).code).toBe(1012);
  expect(await within(exited, 'serve to exit')).toEqual({ code: 0, signal: null });
});

it('the demo: SIGHUP drains (the client closed with 1012) and exits 0', async () => {
  const { child, url } = await started([mainJs], /JSON-RPC over WebSocket at (ws:\/\/\S+?\/rpc)/);
  const { closed } = await connected(url);
  const exited = exitOf(child);
  child.kill('SIGHUP');
  expect((await within(closed, 'the client to be closed')).code).toBe(1012);
  expect(await within(exited, 'the demo to exit')).toEqual({ code: 0, signal: null });
});
