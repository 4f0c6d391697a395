import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { PassThrough, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { firstValueFrom, lastValueFrom, take, toArray } from 'rxjs';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { UpgradeRejection, createClient, createGateway, streamSocket } from '../../src/index.js';
import type { Gateway, RpcClient, TransportKind } from '../../src/index.js';
import { ensureBuilt, exitOf, mainJs, root } from '../support/demo-process.js';

const SUBTRACT_REQUEST = '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}';
const SUBTRACT_REPLY = '{"jsonrpc":"2.0","result":19,"id":1}';
const clientChild = fileURLToPath(new URL('./stdio-fixtures/client-child.mjs', import.meta.url));

beforeAll(ensureBuilt, 180_000);

/** Everything a test opens; closed in afterEach: clients, gateways, then children. */
const opened = {
  clients: [] as RpcClient[],
  gateways: [] as Gateway[],
  children: [] as ChildProcess[],
};

afterEach(async () => {
  await Promise.all(opened.clients.splice(0).map((client) => client.close()));
  await Promise.all(
    opened.gateways.splice(0).map((gateway) => gateway.close({ timeoutMs: 1_000 })),
  );
  await Promise.all(
    opened.children.splice(0).map((child) => {
      const exited = exitOf(child);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      return exited;
    }),
  );
});

/** Poll `condition` until it holds; fail with `what` after `timeoutMs`. Leaves no timer behind. */
async function waitFor(condition: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

interface Spawned {
  child: ChildProcess;
  /** Everything the child wrote so far. */
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: string | null }>;
}

/**
 * A child process with its three streams piped. With `captureStdout` false the caller reads
 * stdout itself (a client's streamSocket); stderr is always captured.
 */
function spawnChild(
  args: string[],
  env: Record<string, string> = {},
  captureStdout = true,
): Spawned {
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  opened.children.push(child);
  // A child that exits while we still write must not crash the test with EPIPE.
  child.stdin!.on('error', () => undefined);
  let stdout = '';
  let stderr = '';
  if (captureStdout) child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited: exitOf(child),
  };
}

/** The demo serving one connection on its stdin and stdout. */
function spawnDemo(env: Record<string, string> = {}, captureStdout = true): Spawned {
  return spawnChild([mainJs], { STDIO: '1', LOG_LEVEL: 'warn', ...env }, captureStdout);
}

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line.length > 0);
}

describe('serving over stdio: the demo with STDIO=1 as a child process', () => {
  it('a client over the child’s stdout and stdin: calls, topic, stream, server-to-client call; close ends the child with 0', async () => {
    const demo = spawnDemo({ TICK_MS: '50' }, false);
    const client = createClient({
      url: 'stdio:',
      WebSocket: streamSocket(demo.child.stdout!, demo.child.stdin!),
      reconnect: false,
      heartbeat: false,
    });
    opened.clients.push(client);
    const questions: string[] = [];
    client.method('client.confirm', ({ question }: { question: string }) => {
      questions.push(question);
      return `yes to ${question}`;
    });

    expect(await client.call('subtract', [42, 23])).toBe(19);
    expect(await client.call('subtract', { minuend: 42, subtrahend: 23 })).toBe(19);
    expect(await client.call('sum', [1, 2, 4])).toBe(7);
    expect(await client.call('get_data')).toEqual(['hello', 5]);

    const ticks = await firstValueFrom(
      client
        .subscribeWithMeta<{ symbol: string; price: number; at: number }>('ticker')
        .pipe(take(2), toArray()),
    );
    expect(ticks).toHaveLength(2);
    for (const tick of ticks) {
      expect(tick.data).toMatchObject({ symbol: 'DEMO', price: expect.any(Number) });
      expect(tick.seq).toEqual(expect.any(Number));
    }
    expect(ticks[1]!.seq!).toBeGreaterThan(ticks[0]!.seq!);

    const countdown = await lastValueFrom(
      client.subscribe<number>('countdown', { from: 3 }).pipe(toArray()),
    );
    expect(countdown).toEqual([3, 2, 1, 0]);

    expect(await client.call('ask_client', { question: 'q' })).toEqual({
      question: 'q',
      answer: 'yes to q',
    });
    expect(questions).toEqual(['q']);

    // Closing the client ends the child's stdin; the child drains and exits 0 by itself.
    await client.close();
    expect(client.state).toBe('closed');
    const { code, signal } = await demo.exited;
    expect({ code, signal, stderr: code === 0 ? '' : demo.stderr() }).toEqual({
      code: 0,
      signal: null,
      stderr: '',
    });
  });

  it('SIGTERM drains the stdio session and exits 0 (the session the drain closes is no second signal)', async () => {
    const demo = spawnDemo({ TICK_MS: '1000' });
    demo.child.stdin!.write(`${SUBTRACT_REQUEST}\n`);
    await waitFor(() => demo.stdout().includes('"result":19'), 'the answer');
    // The drain's ping, answered as a client of the protocol does; then the session closes.
    demo.child.kill('SIGTERM');
    await waitFor(() => demo.stdout().includes('"rpc.ping"'), 'the drain ping');
    const ping = lines(demo.stdout())
      .map((line) => JSON.parse(line) as { method?: string; id?: number })
      .find((message) => message.method === 'rpc.ping')!;
    demo.child.stdin!.write(`{"jsonrpc":"2.0","result":"pong","id":${ping.id}}\n`);
    const { code, signal } = await demo.exited;
    expect({ code, signal, stderr: code === 0 ? '' : demo.stderr() }).toEqual({
      code: 0,
      signal: null,
      stderr: '',
    });
  });

  it('stdout carries only JSON-RPC lines; the log goes to stderr', async () => {
    const demo = spawnDemo({ LOG_LEVEL: 'info', TICK_MS: '20' });
    const stdin = demo.child.stdin!;
    stdin.write(`${SUBTRACT_REQUEST}\n`);
    stdin.write('{"jsonrpc": "2.0", "method": "subscribe", "params": ["ticker"], "id": 2}\n');
    stdin.write('{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}\n');
    stdin.write('{"jsonrpc": "2.0", "method": "foobar", "id": "3"}\n');
    stdin.write('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]\n');
    const tickerLines = (): number =>
      lines(demo.stdout()).filter((line) => line.includes('"method":"subscription"')).length;
    await waitFor(() => tickerLines() >= 3, 'three ticker notifications on stdout');
    stdin.end();
    const { code } = await demo.exited;
    expect(code).toBe(0);

    const out = lines(demo.stdout()).map((line) => JSON.parse(line) as Record<string, unknown>);
    for (const message of out) expect(message).toMatchObject({ jsonrpc: '2.0' });
    expect(out).toContainEqual({ jsonrpc: '2.0', result: 19, id: 1 });
    expect(out).toContainEqual({ jsonrpc: '2.0', method: 'hello', params: [7] });
    expect(out).toContainEqual({
      jsonrpc: '2.0',
      error: { code: -32601, message: 'Method not found' },
      id: '3',
    });
    expect(out).toContainEqual({
      jsonrpc: '2.0',
      error: { code: -32700, message: 'Parse error' },
      id: null,
    });
    // Every stdout byte belongs to a complete line.
    expect(demo.stdout().endsWith('\n')).toBe(true);

    const log = lines(demo.stderr()).map((line) => JSON.parse(line) as { msg?: string });
    const messages = log.map((entry) => entry.msg);
    expect(messages).toContain('connected');
    expect(messages).toContain('disconnected');
    for (const entry of out) expect(JSON.stringify(entry)).not.toContain('"msg"');
  });

  it('a request then end of stdin: exactly the reply on stdout, exit 0', async () => {
    const demo = spawnDemo();
    demo.child.stdin!.end(`${SUBTRACT_REQUEST}\n`);
    const { code, signal } = await demo.exited;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(demo.stdout()).toBe(`${SUBTRACT_REPLY}\n`);
  });

  it('stdin ending while a call is still in flight: its reply is written before the exit', async () => {
    // ask_client calls back into us (client.confirm). Our answer and the end of stdin arrive
    // together, while ask_client is still running: its reply must not be lost.
    const demo = spawnDemo();
    const stdin = demo.child.stdin!;
    stdin.write('{"jsonrpc":"2.0","method":"ask_client","params":{"question":"q"},"id":7}\n');
    await waitFor(() => demo.stdout().includes('\n'), 'the client.confirm call');
    const call = JSON.parse(lines(demo.stdout())[0]!) as { method: string; id: unknown };
    expect(call).toMatchObject({ method: 'client.confirm', params: { question: 'q' } });
    stdin.end(`${JSON.stringify({ jsonrpc: '2.0', result: 'sure', id: call.id })}\n`);
    const { code } = await demo.exited;
    expect(code).toBe(0);
    expect(lines(demo.stdout())[1]).toBe(
      '{"jsonrpc":"2.0","result":{"question":"q","answer":"sure"},"id":7}',
    );
  });
});

describe('serveStream in-process', () => {
  function streamGateway(options: Parameters<typeof createGateway>[0] = {}): Gateway {
    const gateway = createGateway<unknown>({
      logger: pino({ level: 'silent' }),
      heartbeatIntervalMs: 0,
      ...options,
    });
    gateway.method('subtract', ([a, b]: [number, number]) => a - b);
    opened.gateways.push(gateway);
    return gateway;
  }

  it('a line longer than maxMessageBytes gets one -32600 error line and the output ends', async () => {
    const gateway = streamGateway({ limits: { maxMessageBytes: 64 } });
    const input = new PassThrough();
    const output = new PassThrough();
    let written = '';
    output.on('data', (chunk: Buffer) => (written += chunk.toString()));
    const ended = new Promise<void>((resolve) => output.once('end', () => resolve()));
    const session = await gateway.serveStream(input, output);

    // 61 bytes: within the limit.
    const small = '{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}';
    expect(Buffer.byteLength(small)).toBeLessThanOrEqual(64);
    input.write(`${small}\n`);
    await waitFor(() => written.includes('\n'), 'the reply to the small request');
    expect(written).toBe(`${SUBTRACT_REPLY}\n`);

    const prefix = '{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":2,"pad":"';
    const big = `${prefix}${'x'.repeat(100 - prefix.length - 2)}"}`;
    expect(Buffer.byteLength(big)).toBe(100);
    input.write(`${big}\n`);
    await ended;

    const [first, ...rest] = lines(written);
    expect(first).toBe(SUBTRACT_REPLY);
    // The error line, then the close notice with the code a WebSocket would be closed with.
    expect(rest).toHaveLength(2);
    expect(JSON.parse(rest[0]!)).toMatchObject({
      jsonrpc: '2.0',
      error: { code: -32600 },
      id: null,
    });
    expect(JSON.parse(rest[1]!)).toEqual({
      jsonrpc: '2.0',
      method: 'rpc.close',
      params: { code: 1009, reason: 'message too large' },
    });
    expect(await session.closed).toMatchObject({ code: 1009 });
    await waitFor(() => gateway.sessions.size === 0, 'the session to be gone');
  });

  it('answers a last line that has no newline, once the input ends', async () => {
    const gateway = streamGateway();
    const input = new PassThrough();
    const output = new PassThrough();
    let written = '';
    output.on('data', (chunk: Buffer) => (written += chunk.toString()));
    const ended = new Promise<void>((resolve) => output.once('end', () => resolve()));
    await gateway.serveStream(input, output);
    input.end('{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}');
    await ended;
    expect(written).toBe(`${SUBTRACT_REPLY}\n`);
  });

  it('stops reading its input once the connection has closed', async () => {
    const gateway = streamGateway();
    const input = new PassThrough();
    const output = new PassThrough();
    output.resume();
    const session = await gateway.serveStream(input, output);
    session.close();
    await session.closed;
    expect(input.destroyed).toBe(true);
  });

  it('a streamSocket client gets what the server wrote before the client was made', async () => {
    const gateway = streamGateway();
    const toClient = new PassThrough();
    const toServer = new PassThrough();
    const session = await gateway.serveStream(toServer, toClient);
    session.notify('welcome', ['early']);
    await new Promise((resolve) => setImmediate(resolve));
    const client = createClient({
      url: 'stdio:',
      WebSocket: streamSocket(toClient, toServer),
      reconnect: false,
      heartbeat: false,
    });
    const welcome = firstValueFrom(client.notificationsOf<[string]>('welcome'));
    expect(await welcome).toEqual(['early']);
    expect(await client.call('subtract', [42, 23])).toBe(19);
    await client.close();
  });

  it('pipes have no address: many stdio connections are not held to the per-address limit', async () => {
    const gateway = streamGateway({ limits: { maxConnectionsPerIp: 1 } });
    const sessions = [];
    for (let i = 0; i < 3; i++)
      sessions.push(await gateway.serveStream(new PassThrough(), new PassThrough()));
    expect(gateway.sessions.size).toBe(3);
    for (const session of sessions) session.close();
  });

  it('authenticate sees transport "stdio"; a refusal is one error line and the output ends', async () => {
    const transports: TransportKind[] = [];
    const gateway = streamGateway({
      authenticate: ({ transport }) => {
        transports.push(transport);
        throw new UpgradeRejection(401, 'A token is required');
      },
    });
    const input = new PassThrough();
    const output = new PassThrough();
    let written = '';
    output.on('data', (chunk: Buffer) => (written += chunk.toString()));
    const ended = new Promise<void>((resolve) => output.once('end', () => resolve()));
    await expect(gateway.serveStream(input, output)).rejects.toThrow(/refused/);
    await ended;
    expect(transports).toEqual(['stdio']);
    expect(lines(written)).toHaveLength(1);
    expect(JSON.parse(written)).toEqual({
      jsonrpc: '2.0',
      error: { code: -32004, message: 'A token is required', data: { status: 401 } },
      id: null,
    });
    expect(gateway.sessions.size).toBe(0);
  });

  it('a refusal written to an output whose reader is gone (EPIPE) and an input that errors do not crash the process', async () => {
    const gateway = streamGateway({
      authenticate: async () => {
        // The input fails while the hook decides.
        input.destroy(new Error('read ECONNRESET'));
        await new Promise((resolve) => setImmediate(resolve));
        throw new UpgradeRejection(401, 'A token is required');
      },
    });
    const input = new PassThrough();
    let failedOnce!: () => void;
    const failed = new Promise<void>((resolve) => (failedOnce = resolve));
    // The other end is gone: every write fails, as a pipe's does once its reader has exited.
    const output = new Writable({
      write(_chunk, _encoding, callback) {
        failedOnce();
        callback(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
      },
    });
    await expect(gateway.serveStream(input, output)).rejects.toThrow(/refused/);
    await failed;
    // The errors' events have been emitted by now (they follow the failed write in a tick).
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(output.destroyed).toBe(true);
    expect(gateway.sessions.size).toBe(0);
  });
});

describe('consuming over stdio: a client child served by gateway.serveStream', () => {
  it('the child calls subtract and gets two news messages over its own stdin and stdout, then exits 0', async () => {
    const transports: TransportKind[] = [];
    const gateway = createGateway<unknown>({
      logger: pino({ level: 'silent' }),
      heartbeatIntervalMs: 0,
      authenticate: ({ transport }) => {
        transports.push(transport);
        return {};
      },
    });
    opened.gateways.push(gateway);
    gateway.method('subtract', ([a, b]: [number, number]) => a - b);
    gateway.topic('news');

    const fixture = spawnChild([clientChild], {}, false);
    const session = await gateway.serveStream(fixture.child.stdout!, fixture.child.stdin!);
    expect(transports).toEqual(['stdio']);
    expect(gateway.sessions.get(session.id)).toBe(session);

    await waitFor(
      () => gateway.pubsub.subscriptionCount(session) >= 1 || fixture.child.exitCode !== null,
      'the child to subscribe to news',
    );
    await gateway.publish('news', { headline: 'first' });
    await gateway.publish('news', { headline: 'second' });

    const { code, signal } = await fixture.exited;
    expect({ code, signal, stderr: code === 0 ? '' : fixture.stderr() }).toEqual({
      code: 0,
      signal: null,
      stderr: '',
    });
    const report = lines(fixture.stderr());
    expect(report).toHaveLength(1);
    expect(JSON.parse(report[0]!)).toEqual({
      subtract: 7,
      news: [{ headline: 'first' }, { headline: 'second' }],
    });
    // The child's close ended the session on our side too.
    expect(await session.closed).toMatchObject({ code: 1000 });
    await waitFor(() => gateway.sessions.size === 0, 'the session to be gone');
  });
});

describe('serveStream: input that ends while authenticate runs', () => {
  it('an empty input ended during an async hook closes the session (no slot held)', async () => {
    const gateway = createGateway<unknown>({
      logger: pino({ level: 'silent' }),
      heartbeatIntervalMs: 0,
      authenticate: async () => {
        await new Promise((resolve) => setTimeout(resolve, 20));
        return {};
      },
    });
    try {
      // Not destroyed at its end (autoDestroy off): ended, yet still there to serve.
      const input = new PassThrough({ autoDestroy: false });
      const output = new PassThrough();
      output.resume();
      const serving = gateway.serveStream(input, output);
      // Read to its end while the hook runs, as a flowing stdin or socket would be.
      input.resume();
      input.end();
      await new Promise<void>((resolve) => input.once('end', () => resolve()));
      const session = await serving;
      expect(await session.closed).toMatchObject({ code: 1000 });
      await waitFor(() => gateway.sessions.size === 0, 'the session to be gone');
    } finally {
      await gateway.close();
    }
  });
});
