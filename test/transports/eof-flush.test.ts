/**
 * The end of a stream's input (stdio EOF, TCP half-close) is not the end of its output: every
 * call sent before it is answered, and the answers are all written, however slowly the other
 * side reads them; a process serving stdio exits only once its output is flushed.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { firstValueFrom } from 'rxjs';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createGateway, silentLogger } from '../../src/index.js';
import type { Gateway } from '../../src/index.js';
import { ensureBuilt, exitOf, mainJs, root } from '../support/demo-process.js';
import { within } from '../support/waiting.js';
import { readSlowly } from './slow-reader.js';

/** Deadlines here only turn a hang into a failure. */
const HANG_GUARD_MS = 300_000;

const children: ChildProcess[] = [];
const sockets: Socket[] = [];
const gateways: Gateway[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(gateways.splice(0).map((gateway) => gateway.close({ timeoutMs: 1_000 })));
  await Promise.all(
    children.splice(0).map((child) => {
      const exited = exitOf(child);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      return exited;
    }),
  );
});

beforeAll(ensureBuilt, 180_000);

/** `count` sum requests, one per line, ids 0 to count - 1. */
function requests(count: number): string {
  let text = '';
  for (let id = 0; id < count; id++)
    text += `{"jsonrpc":"2.0","method":"sum","params":[${id},1],"id":${id}}\n`;
  return text;
}

/**
 * Every line is a JSON-RPC response, and their ids are 0 to count - 1, each once. The answers
 * are results or -32003 (the default rate limit answers most of a flood): both are answers.
 */
function expectEveryAnswer(
  output: string,
  count: number,
  resultIsRight: (id: number, result: unknown) => boolean = (id, result) => result === id + 1,
): void {
  const lines = output.split('\n').filter((line) => line.length > 0);
  const ids = new Set<unknown>();
  let results = 0;
  for (const line of lines) {
    const message = JSON.parse(line) as { id: number; result?: unknown; error?: { code: number } };
    if (message.result === undefined) expect(message.error?.code).toBe(-32003);
    else if (resultIsRight(message.id, message.result)) results++;
    else throw new Error(`a wrong answer: ${line}`);
    ids.add(message.id);
  }
  expect({ lines: lines.length, distinctIds: ids.size }).toEqual({
    lines: count,
    distinctIds: count,
  });
  for (let id = 0; id < count; id++) if (!ids.has(id)) throw new Error(`no answer for id ${id}`);
  expect(results).toBeGreaterThan(0);
  expect(output.endsWith('\n')).toBe(true);
}

describe('stdio: the demo with STDIO=1 answers everything sent before EOF to a slow reader', () => {
  it(
    '50 000 requests through a pipe read in small chunks: 50 000 answers, then exit 0',
    async () => {
      const COUNT = 50_000;
      const child = spawn(process.execPath, [mainJs], {
        cwd: root,
        env: {
          ...process.env,
          STDIO: '1',
          LOG_LEVEL: 'warn',
          TICK_MS: '3600000',
          // How long the answers may take to be read: here, only a guard against a hang.
          DRAIN_DEADLINE_MS: String(HANG_GUARD_MS),
        },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      children.push(child);
      const exited = exitOf(child);
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.stdin!.on('error', () => undefined);
      const output = readSlowly(child.stdout!);
      child.stdin!.end(requests(COUNT));

      const { code, signal } = await exited;
      expect({ code, signal, stderr: code === 0 ? '' : stderr }).toEqual({
        code: 0,
        signal: null,
        stderr: '',
      });
      expectEveryAnswer(await output, COUNT);
    },
    HANG_GUARD_MS,
  );
});

describe('TCP half-close: every answer reaches a slow reader', () => {
  it(
    '60 000 requests, then the client ends its side and reads only once the gateway is done, in small chunks: 60 000 answers',
    async () => {
      const COUNT = 60_000;
      const gateway = createGateway({
        logger: silentLogger,
        heartbeatIntervalMs: 0,
        // Every call is answered with its result (no -32003), and the gateway keeps reading
        // however much is queued: ~18 MB of answers wait for the reader.
        limits: { ratePerSecond: 0, maxBufferedBytes: 0, endOfInputDeadlineMs: HANG_GUARD_MS },
      });
      gateways.push(gateway);
      const pad = 'x'.repeat(256);
      gateway.method('sum', (numbers: number[]) => `${numbers.reduce((a, b) => a + b, 0)}${pad}`);
      const { port } = await gateway.listenTcp(0, '127.0.0.1');

      const sessionClosed = firstValueFrom(gateway.disconnected$);
      const socket = connect(port, '127.0.0.1');
      sockets.push(socket);
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      socket.on('error', () => undefined);
      socket.end(requests(COUNT));
      // A reader far behind the writer: nothing is read until the gateway has answered every
      // call and closed the session, then everything is read in small chunks.
      await within(sessionClosed, 'the session to close', HANG_GUARD_MS);
      const output = await readSlowly(socket, 4096);

      expectEveryAnswer(output, COUNT, (id, result) => result === `${id + 1}${pad}`);
      await closed;
    },
    HANG_GUARD_MS,
  );
});
