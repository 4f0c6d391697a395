import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AskClient, ClientConfirm, Subtract } from '../../demo/service.js';
import { Resources, freePort, recordStates, sleep, waitForState } from './harness.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const mainJs = fileURLToPath(new URL('../../dist/demo/main.js', import.meta.url));

const res = new Resources();
afterEach(() => res.cleanup());

beforeAll(async () => {
  if (existsSync(mainJs)) return;
  await new Promise<void>((resolve, reject) => {
    execFile('npm', ['run', 'build'], { cwd: root }, (err, _stdout, stderr) =>
      err ? reject(new Error(`npm run build failed: ${stderr}`)) : resolve(),
    );
  });
}, 120_000);

/** Poll /livez until the process answers (or exits). */
async function waitForLivez(child: ChildProcess, httpUrl: string): Promise<void> {
  for (;;) {
    if (child.exitCode !== null) throw new Error(`demo exited early with ${child.exitCode}`);
    try {
      const response = await fetch(`${httpUrl}/livez`);
      if (response.status === 200) {
        await response.arrayBuffer();
        return;
      }
    } catch {
      // Not listening yet.
    }
    await sleep(50);
  }
}

function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: string | null }> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null)
      return resolve({ code: child.exitCode, signal: child.signalCode });
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

describe('the demo process (dist/demo/main.js)', () => {
  it('serves calls on PORT and drains and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const httpUrl = `http://127.0.0.1:${port}`;
    const child = spawn(process.execPath, [mainJs], {
      cwd: root,
      env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    res.children.push(child);
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = exitOf(child);

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
    expect({ code, signal, output: code === 0 ? '' : output }).toEqual({
      code: 0,
      signal: null,
      output: '',
    });
    // The client was told the server is going away and is now trying to come back.
    await waitForState(client, 'reconnecting');
    expect(states).toEqual(['connecting', 'open', 'reconnecting']);
  });
});
