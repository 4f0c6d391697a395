// `wsrpc-gateway serve --config FILE` as a deployment runs it: the built CLI (`npm run build`
// first) in a child process with a Redis broker and a Python upstream (standard library only),
// a client calling a method routed to the upstream and subscribing to a declared topic, and
// SIGTERM draining and exiting 0.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { firstValueFrom, take, toArray } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { createClient } from '../../src/client/client.js';
import type { RpcClient } from '../../src/client/client.js';
import { REDIS_URL, deleteRedisKeys } from '../support/brokers.js';
import { killChild } from '../support/processes.js';
import { startPythonUpstream } from '../support/python-upstream.js';
import { makeSelfSignedCertificate } from '../support/tls.js';
import type { PythonUpstream } from '../support/python-upstream.js';
import { waitFor, within } from '../support/waiting.js';

const cli = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'serve-'));
const prefix = `serve-test-${process.pid}`;
const API_KEY = 'a-backend-key-of-enough-length';
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await deleteRedisKeys(REDIS_URL, prefix);
});

interface Served {
  readonly child: ChildProcess;
  /** The WebSocket URL the server logged. */
  readonly url: string;
  /** The server API's URL it logged. */
  readonly serverApi: string | undefined;
  readonly exited: Promise<number | null>;
}

/** `wsrpc-gateway serve --config` on `config`; resolves once it logged its URL. */
async function serveFile(config: string, env: Record<string, string> = {}): Promise<Served> {
  const path = join(dir, `gateway-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(path, config);
  const child = spawn(process.execPath, [cli, 'serve', '--config', path], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
  });
  cleanups.push(() => killChild(child));
  let output = '';
  child.stderr!.setEncoding('utf8').on('data', (text: string) => (output += text));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const serving = new Promise<{ url: string; serverApi?: string }>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      output += `${line}\n`;
      const entry = JSON.parse(line) as { msg?: string; url?: string; serverApi?: string };
      if (entry.msg === 'serving' && entry.url) resolve({ ...entry, url: entry.url });
    });
    void exited.then((code) => reject(new Error(`serve exited (${code}):\n${output}`)));
  });
  const { url, serverApi } = await within(serving, 'serve to log its URL', 15_000);
  return { child, url, serverApi, exited };
}

/** A call to the server API `served` logged, with the test's key; its result (throws its error). */
async function apiCall<T>(served: Served, method: string, params: object): Promise<T> {
  const answer = await fetch(served.serverApi!, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = (await answer.json()) as { result?: T; error?: unknown };
  if (body.error !== undefined) throw new Error(JSON.stringify(body.error));
  return body.result!;
}

function connect(url: string): RpcClient {
  const client = createClient({ url, WebSocket });
  cleanups.push(() => client.close());
  return client;
}

describe('wsrpc-gateway serve', () => {
  let upstream: PythonUpstream;

  it('routes calls to the Python upstream, serves declared topics, drains on SIGTERM', async () => {
    upstream = await startPythonUpstream();
    cleanups.push(() => upstream.stop());
    const served = await serveFile(
      [
        'listen: { host: 127.0.0.1, port: 0 }',
        'broker:',
        '  kind: redis',
        `  url: "\${REDIS_URL}"`,
        `  prefix: ${prefix}`,
        'topics:',
        '  "news.*": { history: { maxLength: 10 } }',
        '  "room.*": { presence: { maxListed: 50 } }',
        'upstreams:',
        `  orders: { url: "${upstream.url}", timeoutMs: 5000 }`,
        'methods:',
        '  "orders.*": orders',
        'serverApi:',
        '  listen: { host: 127.0.0.1, port: 0 }',
        '  keys: ["${API_KEY}"]',
        'shutdown: { drainDeadlineMs: 2000 }',
        '',
      ].join('\n'),
      { REDIS_URL, API_KEY },
    );
    expect(served.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/rpc$/);
    const client = connect(served.url);
    const reply = (await client.call('orders.get', { id: 7 })) as {
      params: unknown;
      headers: { session: string | null; requestId: string | null };
    };
    expect(reply.params).toEqual({ id: 7 });
    expect(reply.headers.session).toEqual(expect.any(String));
    expect(reply.headers.requestId).toEqual(expect.any(String));

    // A declared topic: a backend publishes through the server API.
    const messages = firstValueFrom(client.subscribe('news.today').pipe(take(1), toArray()));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const published = await apiCall<{ seq: number; duplicate: boolean }>(served, 'publish', {
      topic: 'news.today',
      data: { headline: 'hello' },
    });
    expect(published).toEqual({ seq: expect.any(Number), duplicate: false });
    expect(await within(messages, 'the published message')).toEqual([{ headline: 'hello' }]);

    // A topic declared with presence: the server API lists who is subscribed.
    const inRoom = client.subscribe('room.1').subscribe();
    cleanups.push(() => Promise.resolve(inRoom.unsubscribe()));
    const members = () => apiCall<{ members: unknown[] }>(served, 'members', { topic: 'room.1' });
    await waitFor(async () => (await members()).members?.length === 1, 'one member of room.1');

    served.child.kill('SIGTERM');
    expect(await within(served.exited, 'serve to exit after SIGTERM')).toBe(0);
  });

  /** `serve` with the Python upstream as `auth` and the configuration's other `lines`. */
  async function servedWithPythonAuth(lines: string[]): Promise<Served> {
    upstream = await startPythonUpstream();
    cleanups.push(() => upstream.stop());
    return serveFile(
      [
        'listen: { host: 127.0.0.1, port: 0 }',
        `upstreams: { auth: { url: "${upstream.url}" } }`,
        ...lines,
        '',
      ].join('\n'),
    );
  }

  /** A client of `served` sending `token` as its bearer, closed after the test. */
  function bearerClient(served: Served, token: string, options: { reconnect?: false } = {}) {
    const client = createClient({
      url: served.url,
      WebSocket,
      headers: { authorization: `Bearer ${token}` },
      ...options,
    });
    cleanups.push(() => client.close());
    return client;
  }

  it('the connect and subscribe hooks decide through the Python upstream', async () => {
    const served = await servedWithPythonAuth([
      'topics: { "private.*": {} }',
      'methods: { "orders.*": auth }',
      'hooks:',
      '  connect: { upstream: auth, timeoutMs: 2000 }',
      '  subscribe: { upstream: auth, topics: ["private.*"] }',
    ]);
    const alice = bearerClient(served, 'good-alice');
    const reply = (await alice.call('orders.get', {})) as { headers: { user: string | null } };
    expect(reply.headers.user).toBe('alice');
    const own = firstValueFrom(alice.subscribe('private.alice.inbox').pipe(take(1), toArray()));
    const other = firstValueFrom(alice.subscribe('private.bob.inbox').pipe(toArray()));
    await expect(within(other, "bob's topic refused")).rejects.toMatchObject({ code: -32004 });
    void own.catch(() => undefined);

    const refused = bearerClient(served, 'bad');
    await expect(refused.call('orders.get', {})).rejects.toThrow();
    // A refusal of the credentials stops the retries (reconnect.onAuthFailure: 'stop').
    expect(refused.lastDisconnect?.httpStatus).toBe(401);
  });

  it("a hook's reply is held to the gateway's limits.maxDepth, as a client's message is", async () => {
    // The connect hook answers {result: {context: {user, via}, user}}: three levels deep.
    const served = await servedWithPythonAuth([
      'limits: { maxDepth: 2 }',
      'hooks:',
      '  connect: { upstream: auth, timeoutMs: 2000 }',
    ]);
    const refused = bearerClient(served, 'good-alice', { reconnect: false });
    await expect(refused.opened()).rejects.toThrow();
    // Not the credentials: the upstream's reply was refused, as an unavailable hook is.
    expect(refused.lastDisconnect?.httpStatus).toBe(503);
  });

  it('a configuration with problems: exit 1 before listening, each problem printed', async () => {
    const path = join(dir, 'bad.yaml');
    writeFileSync(path, 'listen: { port: -1 }\nbroker: { kind: kafka }\n');
    const child = spawn(process.execPath, [cli, 'serve', '--config', path], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(() => killChild(child));
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
    const code = await within(new Promise((resolve) => child.once('exit', resolve)), 'exit');
    expect(code).toBe(1);
    expect(stderr).toContain(`${path}: listen.port must be an integer from 0 to 65535`);
    expect(stderr).toContain(`${path}: broker.kind must be "memory" or "redis" or "nats"`);
  });

  it('tls: a file that is not PEM, or a key of another certificate, is exit 1 naming the field', async () => {
    const one = makeSelfSignedCertificate();
    const other = makeSelfSignedCertificate();
    cleanups.push(() => {
      one.remove();
      other.remove();
      return Promise.resolve();
    });
    const notPem = join(dir, 'not.pem');
    writeFileSync(notPem, 'not a pem\n');
    const refusal = async (tls: string): Promise<string> => {
      const path = join(dir, 'tls.yaml');
      writeFileSync(path, `listen: { host: 127.0.0.1, port: 0 }\ntls: ${tls}\n`);
      const child = spawn(process.execPath, [cli, 'serve', '--config', path], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, LOG_LEVEL: 'info' },
      });
      cleanups.push(() => killChild(child));
      let output = '';
      child.stdout.setEncoding('utf8').on('data', (text: string) => (output += text));
      child.stderr.setEncoding('utf8').on('data', (text: string) => (output += text));
      const code = await within(new Promise((resolve) => child.once('exit', resolve)), 'exit');
      expect(code).toBe(1);
      const logged = output
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { msg: string; err?: { message: string } });
      expect(logged.map((line) => line.msg)).toEqual(['could not start the gateway']);
      return logged[0]!.err!.message;
    };
    expect(await refusal(`{ certFile: "${notPem}", keyFile: "${one.keyFile}" }`)).toMatch(
      new RegExp(`^tls\\.certFile: cannot use ${notPem}: .*PEM`),
    );
    expect(await refusal(`{ certFile: "${one.certFile}", keyFile: "${notPem}" }`)).toMatch(
      new RegExp(`^tls\\.keyFile: cannot use ${notPem}: `),
    );
    expect(
      await refusal(
        `{ certFile: "${one.certFile}", keyFile: "${one.keyFile}", caFile: "${notPem}" }`,
      ),
    ).toMatch(new RegExp(`^tls\\.caFile: cannot use ${notPem}: `));
    expect(await refusal(`{ certFile: "${one.certFile}", keyFile: "${other.keyFile}" }`)).toMatch(
      new RegExp(
        `^tls\\.keyFile: cannot use ${other.keyFile} with tls\\.certFile ${one.certFile}: `,
      ),
    );
    // A certificate, its key and an authority are taken, and serve listens with TLS.
    const served = await serveFile(
      `listen: { host: 127.0.0.1, port: 0 }\ntls: { certFile: "${one.certFile}", keyFile: "${one.keyFile}", caFile: "${other.certFile}" }\n`,
    );
    expect(served.url).toMatch(/^wss:\/\/127\.0\.0\.1:\d+\/rpc$/);
    served.child.kill('SIGTERM');
    expect(await within(served.exited, 'serve to exit after SIGTERM')).toBe(0);
  });

  it('LOG_LEVEL: a level pino does not have is exit 1 naming it; empty is unset (info)', async () => {
    const path = join(dir, 'log-level.yaml');
    writeFileSync(path, 'listen: { host: 127.0.0.1, port: 0 }\n');
    for (const level of ['verbose', 'INFO']) {
      const child = spawn(process.execPath, [cli, 'serve', '--config', path], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, LOG_LEVEL: level },
      });
      cleanups.push(() => killChild(child));
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
      const code = await within(new Promise((resolve) => child.once('exit', resolve)), 'exit');
      expect(code).toBe(1);
      expect(stderr).toBe(
        `wsrpc-gateway serve: LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent, not "${level}"\n`,
      );
    }
    const served = await serveFile('listen: { host: 127.0.0.1, port: 0 }\n', { LOG_LEVEL: '' });
    expect(served.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/rpc$/);
    served.child.kill('SIGTERM');
    expect(await within(served.exited, 'serve to exit after SIGTERM')).toBe(0);
  });
});
