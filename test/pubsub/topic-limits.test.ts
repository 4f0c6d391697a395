/**
 * Topic names a client may make the gateway keep (issue 14, finding 1): a subscribe's name is
 * kept for the life of its subscription, so a name is bounded (`maxTopicNameBytes`, -32602
 * without echoing it) and so are the names one connection holds together
 * (`maxTopicBytesPerConnection`, -32005). The attack that killed the process (many
 * connections, each with subscriptions to ~1 MB names) is run, bounded, against a gateway in a
 * child process, whose heap after full collections must stay flat.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { bundleForNode } from '../support/bundle.js';
import { killChild } from '../support/processes.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { RawRpc } from '../support/raw-rpc.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const sockets: RawRpc[] = [];
const cleanups: (() => unknown)[] = [];

afterEach(async () => {
  await Promise.all(sockets.splice(0).map((raw) => raw.close()));
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function gatewayWith(limits: Record<string, number> = {}): Promise<RunningGateway> {
  const running = await startGateway({ limits });
  cleanups.push(() => running.gateway.close());
  running.gateway.topic('prices.*');
  running.gateway.topic('exact');
  return running;
}

async function client(url: string): Promise<RawRpc> {
  const raw = await RawRpc.open(url);
  sockets.push(raw);
  return raw;
}

describe('maxTopicNameBytes', () => {
  it('refuses a longer name with -32602, its size and the limit, without echoing it', async () => {
    const { gateway, url } = await gatewayWith();
    const raw = await client(url);
    const longest = `prices.${'x'.repeat(256 - 7)}`;
    expect(typeof (await raw.request('subscribe', [longest])).result).toBe('string');

    const name = `prices.${'x'.repeat(1024 * 1024 - 100)}`;
    const reply = await raw.request('subscribe', [name]);
    expect(reply.error).toEqual({
      code: -32602,
      message: `Topic name too long: ${name.length} bytes (UTF-8), at most 256 (limits.maxTopicNameBytes)`,
      data: { limit: 256, bytes: name.length },
    });
    expect(JSON.stringify(reply).length).toBeLessThan(300);
    // Not a declared topic either: still not echoed (the unknown-topic error names it).
    const unknown = await raw.request('subscribe', { topic: `nope.${'y'.repeat(5_000)}` });
    expect(unknown.error?.code).toBe(-32602);
    expect(unknown.error?.data).toEqual({ limit: 256, bytes: 5_005 });
    expect(gateway.pubsub.topics()).toEqual({ [longest]: 1 });
  });

  it('counts UTF-8 bytes, not characters', async () => {
    const { url } = await gatewayWith({ maxTopicNameBytes: 20 });
    const raw = await client(url);
    const fits = `prices.${'é'.repeat(6)}`; // 7 + 12 bytes
    const over = `prices.${'é'.repeat(7)}`; // 7 + 14 bytes, 14 characters
    expect(typeof (await raw.request('subscribe', [fits])).result).toBe('string');
    expect((await raw.request('subscribe', [over])).error?.data).toEqual({ limit: 20, bytes: 21 });
  });
});

describe('maxTopicBytesPerConnection', () => {
  it('refuses a subscribe whose name would take the connection past it (-32005), until some are released', async () => {
    const { url } = await gatewayWith({ maxTopicBytesPerConnection: 100 });
    const raw = await client(url);
    const name = (i: number): string => `prices.${String(i).padStart(43, '0')}`; // 50 bytes
    const first = await raw.request('subscribe', [name(1)]);
    expect(typeof first.result).toBe('string');
    expect(typeof (await raw.request('subscribe', [name(2)])).result).toBe('string');
    const refused = await raw.request('subscribe', [name(3)]);
    expect(refused.error).toEqual({
      code: -32005,
      message:
        'Too many subscriptions: their topic names would take 150 bytes, at most 100 (limits.maxTopicBytesPerConnection)',
      data: { limit: 100, bytes: 150 },
    });
    // Another connection has its own count.
    const other = await client(url);
    expect(typeof (await other.request('subscribe', [name(3)])).result).toBe('string');
    // Released by unsubscribe; refused subscribes took nothing.
    expect((await raw.request('unsubscribe', [first.result])).result).toBe(true);
    expect(typeof (await raw.request('subscribe', [name(3)])).result).toBe('string');
    expect((await raw.request('subscribe', ['exact'])).error?.code).toBe(-32005);
  });
});

describe('the attack, bounded: 100 connections subscribing to ~100 KB names', () => {
  let child: ChildProcess | undefined;

  async function startChild(): Promise<{ url: string }> {
    const { script, dir } = await bundleForNode('test/pubsub/heap-gateway.ts');
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const started = spawn(process.execPath, ['--expose-gc', script], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = started;
    cleanups.push(() => killChild(started));
    let output = '';
    const port = await new Promise<number>((resolve, reject) => {
      started.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        const match = /\{"listening":(\d+)\}/.exec(output);
        if (match) resolve(Number(match[1]));
      });
      started.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      started.once('exit', (code) => reject(new Error(`gateway exited (${code}): ${output}`)));
    });
    return { url: `ws://127.0.0.1:${port}/rpc` };
  }

  it('refuses every such subscribe with -32602, and the heap after GC stays flat', async () => {
    const { url } = await startChild();
    const control = await client(url);
    const heap = async (): Promise<number> => {
      const reply = await control.request('heap.used', undefined, 30_000);
      if (typeof reply.result !== 'number') throw new Error(JSON.stringify(reply));
      return reply.result;
    };
    const connections = await Promise.all(Array.from({ length: 100 }, () => client(url)));
    const before = await heap();

    const perConnection = 10;
    const nameBytes = 100_000;
    const replies = await Promise.all(
      connections.map(async (raw, c) => {
        const out = [];
        for (let i = 0; i < perConnection; i++) {
          const name = `prices.${c}.${i}.${'x'.repeat(nameBytes)}`;
          out.push(await raw.request('subscribe', [name], 30_000));
        }
        return out;
      }),
    );
    const flat = replies.flat();
    expect(flat).toHaveLength(1_000);
    for (const reply of flat) {
      expect(reply.error?.code).toBe(-32602);
      expect(reply.error?.data).toMatchObject({ limit: 256 });
    }

    // The connections are still open: nothing of the ~100 MB of names they sent is kept.
    const after = await heap();
    expect(child?.exitCode).toBe(null);
    expect(after - before).toBeLessThan(16 * 1024 * 1024);
  }, 120_000);
});

describe('topic names that are not well-formed Unicode', () => {
  it('a lone surrogate is refused on subscribe (-32602) and on publish (TypeError)', async () => {
    const { gateway, url } = await gatewayWith();
    const raw = await client(url);
    // Sent as JSON escapes: a lone surrogate is valid JSON text.
    const reply = await raw.request('subscribe', ['prices.\ud800']);
    expect(reply.error).toEqual({
      code: -32602,
      message: 'Topic name is not well-formed Unicode (a lone surrogate)',
    });
    // Its U+FFFD twin is a name of its own, and is accepted.
    expect(typeof (await raw.request('subscribe', ['prices.\ufffd'])).result).toBe('string');
    await expect(gateway.publish('prices.\udc00', 1)).rejects.toThrow(TypeError);
  });
});
