import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { concat, of, throwError } from 'rxjs';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { InvalidParamsError, JsonRpcError, UpgradeRejection } from '../../src/index.js';
import type { Gateway } from '../../src/index.js';
import { freePort } from '../support/network.js';
import { CliResources, ensureCliBuilt, root, waitFor } from './cli-harness.js';

const resources = new CliResources();

beforeAll(ensureCliBuilt, 180_000);
afterEach(() => resources.cleanup());

function subtract(params: unknown): number {
  if (Array.isArray(params)) return (params[0] as number) - (params[1] as number);
  const { minuend, subtrahend } = params as { minuend: number; subtrahend: number };
  if (typeof minuend !== 'number' || typeof subtrahend !== 'number') {
    throw new InvalidParamsError('minuend and subtrahend must be numbers', { got: params });
  }
  return minuend - subtrahend;
}

const ETH_METHODS = {
  subscribe: 'eth_subscribe',
  notification: 'eth_subscription',
  unsubscribe: 'eth_unsubscribe',
};
const ETH_METHODS_EXAMPLE = '--methods eth_subscribe,eth_subscription,eth_unsubscribe';

async function gatewayWithSubtract(): Promise<{ gateway: Gateway<unknown>; url: string }> {
  const { gateway, port } = await resources.gateway();
  gateway.method('subtract', subtract);
  return { gateway, url: `ws://127.0.0.1:${port}/rpc` };
}

describe('wsrpc --help and --version', () => {
  it('--help lists the commands, options and exit codes, and exits 0', async () => {
    const result = await resources.run(['--help']);
    expect(result.code).toBe(0);
    for (const word of ['call', 'notify', 'subscribe', 'discover', '--header', '--cacert']) {
      expect(result.stdout).toContain(word);
    }
    expect(result.stdout).toContain('Exit codes');
    expect(result.stdout).toContain('--methods SUBSCRIBE,NOTIFICATION,UNSUBSCRIBE');
    expect(result.stdout).toContain(ETH_METHODS_EXAMPLE);
    expect(result.stderr).toBe('');
  });

  it('each command has its own --help', async () => {
    const result = await resources.run(['subscribe', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('Usage: wsrpc subscribe URL TOPIC [PARAMS]');
    expect(result.stdout).toContain('--methods SUBSCRIBE,NOTIFICATION,UNSUBSCRIBE');
    expect(result.stdout).toContain(ETH_METHODS_EXAMPLE);
    // --methods is for subscribe only, so the other commands' help leaves it out.
    const call = await resources.run(['call', '--help']);
    expect(call.code).toBe(0);
    expect(call.stdout).not.toContain('--methods');
  });

  it('--version prints the version from package.json', async () => {
    const { version } = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as {
      version: string;
    };
    const result = await resources.run(['--version']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(version);
  });
});

describe('wsrpc call over ws://', () => {
  it('prints the result of positional and named calls (spec examples) and exits 0', async () => {
    const { url } = await gatewayWithSubtract();
    const positional = await resources.run(['call', url, 'subtract', '[42, 23]']);
    expect(positional).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(positional.stdout)).toBe(19);

    const named = await resources.run([
      'call',
      url,
      'subtract',
      '{"subtrahend": 23, "minuend": 42}',
    ]);
    expect(named).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(named.stdout)).toBe(19);
  });

  it('prints structured results as pretty JSON', async () => {
    const { gateway, port } = await resources.gateway();
    gateway.method('info', () => ({ name: 'gw', tags: ['a', 'b'] }));
    const result = await resources.run(['call', `ws://127.0.0.1:${port}/rpc`, 'info']);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`${JSON.stringify({ name: 'gw', tags: ['a', 'b'] }, null, 2)}\n`);
  });

  it('exits 1 and prints "error CODE: MESSAGE" (and data) for a JSON-RPC error', async () => {
    const { url } = await gatewayWithSubtract();
    const missing = await resources.run(['call', url, 'nope']);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toBe('');
    expect(missing.stderr).toContain('error -32601: Method not found');

    const invalid = await resources.run(['call', url, 'subtract', '{"minuend": "a"}']);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toContain('error -32602: minuend and subtrahend must be numbers');
    expect(invalid.stderr).toContain('data: {"got":{"minuend":"a"}}');
  });

  it('exits 2 with an example for PARAMS that are not JSON, or a scalar', async () => {
    const { url } = await gatewayWithSubtract();
    const notJson = await resources.run(['call', url, 'subtract', '[42, 23']);
    expect(notJson.code).toBe(2);
    expect(notJson.stderr).toContain('not valid JSON');
    expect(notJson.stderr).toContain("'[42, 23]'");
    expect(notJson.stderr).toContain('--help');

    const scalar = await resources.run(['call', url, 'subtract', '42']);
    expect(scalar.code).toBe(2);
    expect(scalar.stderr).toContain('must be a JSON array');
  });

  it('exits 2 for usage errors: unknown command, missing arguments, subscribe over http', async () => {
    for (const args of [
      ['frobnicate'],
      ['call', 'ws://127.0.0.1:1/rpc'],
      ['subscribe', 'http://127.0.0.1:1/rpc', 'feed'],
      ['call', 'localhost:8080/rpc', 'subtract'],
      ['call', 'ws://127.0.0.1:1/rpc', 'subtract', '--timeout', 'soon'],
    ]) {
      const result = await resources.run(args);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr, args.join(' ')).toContain('--help');
    }
    const http = await resources.run(['subscribe', 'http://127.0.0.1:1/rpc', 'feed']);
    expect(http.stderr).toContain('ws://');
  });

  it('exits 3 with "connection refused" when nothing listens', async () => {
    const port = await freePort();
    const result = await resources.run([
      'call',
      `ws://127.0.0.1:${port}/rpc`,
      'subtract',
      '[1, 2]',
    ]);
    expect(result.code).toBe(3);
    expect(result.stderr).toContain(`cannot connect to 127.0.0.1:${port}: connection refused`);
    expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('exits 3 naming 404 for a wrong path', async () => {
    const { port } = await resources.gateway();
    const result = await resources.run(['call', `ws://127.0.0.1:${port}/wrong`, 'x']);
    expect(result.code).toBe(3);
    expect(result.stderr).toContain('404');
    expect(result.stderr).toContain('/rpc');
  });

  it('exits 3 when the server does not answer in time', async () => {
    const { gateway, port } = await resources.gateway();
    gateway.method('slow', (_params, ctx) => {
      return new Promise((_resolve, reject) => {
        ctx.signal.addEventListener('abort', () => reject(new Error('cancelled')));
      });
    });
    const result = await resources.run([
      'call',
      `ws://127.0.0.1:${port}/rpc`,
      'slow',
      '--timeout',
      '300',
    ]);
    expect(result.code).toBe(3);
    expect(result.stderr).toContain('within 300 ms');
    expect(result.stderr).toContain('--timeout');
  });
});

describe('authentication over ws://', () => {
  async function guardedGateway(): Promise<string> {
    const { gateway, port } = await resources.gateway({
      authenticate: ({ headers, protocols }) => {
        if (headers.authorization === 'Bearer secret') return { via: 'header' };
        if (protocols.includes('token.secret')) return { via: 'protocol' };
        throw new UpgradeRejection(401, 'A valid token is required');
      },
    });
    gateway.method('subtract', subtract);
    return `ws://127.0.0.1:${port}/rpc`;
  }

  it('exits 3 mentioning 401, the body and -H when the upgrade is refused', async () => {
    const url = await guardedGateway();
    const result = await resources.run(['call', url, 'subtract', '[42, 23]']);
    expect(result.code).toBe(3);
    expect(result.stderr).toContain('authentication rejected');
    expect(result.stderr).toContain('401');
    expect(result.stderr).toContain('A valid token is required');
    expect(result.stderr).toContain("-H 'Authorization: Bearer");
    expect(result.stdout).toBe('');
  });

  it('succeeds with -H "Authorization: Bearer secret"', async () => {
    const url = await guardedGateway();
    const result = await resources.run([
      'call',
      url,
      'subtract',
      '[42, 23]',
      '-H',
      'Authorization: Bearer secret',
    ]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toBe(19);
  });

  it('succeeds with --protocol carrying the token', async () => {
    const url = await guardedGateway();
    const result = await resources.run([
      'call',
      url,
      'subtract',
      '[42, 23]',
      '--protocol',
      'token.secret',
    ]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toBe(19);
  });
});

describe('wsrpc notify over ws://', () => {
  it('sends the notification, prints nothing and exits 0', async () => {
    const { gateway, port } = await resources.gateway();
    const seen: unknown[] = [];
    gateway.method('record', (params) => {
      seen.push(params);
    });
    const result = await resources.run(['notify', `ws://127.0.0.1:${port}/rpc`, 'record', '[7]']);
    expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    await waitFor(() => seen.length === 1, 'the server to see the notification');
    expect(seen).toEqual([[7]]);
  });
});

describe('wsrpc subscribe over ws://', () => {
  it('prints each published message as a line, and on SIGINT unsubscribes and exits 0', async () => {
    const { gateway, port } = await resources.gateway();
    gateway.topic('feed');
    const cli = resources.start(['subscribe', `ws://127.0.0.1:${port}/rpc`, 'feed']);
    await waitFor(() => gateway.pubsub.topics()['feed'] === 1, 'the CLI to subscribe');

    await gateway.publish('feed', { n: 1 });
    await gateway.publish('feed', 'two');
    await gateway.publish('feed', [3]);
    await waitFor(() => cli.lines().length === 3, 'three lines on stdout');
    expect(cli.lines()).toEqual(['{"n":1}', '"two"', '[3]']);

    cli.child.kill('SIGINT');
    const result = await cli.exited;
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    await waitFor(() => (gateway.pubsub.topics()['feed'] ?? 0) === 0, 'the subscription to end');
    // It said unsubscribe before closing (the server answered it).
    const calls = await gateway.metrics.registry.getSingleMetricAsString('rpc_calls_total');
    expect(calls).toMatch(/rpc_calls_total\{method="unsubscribe",outcome="ok"\} 1/);
  });

  it('exits 0 on SIGTERM too', async () => {
    const { gateway, port } = await resources.gateway();
    gateway.topic('feed');
    const cli = resources.start(['subscribe', `ws://127.0.0.1:${port}/rpc`, 'feed']);
    await waitFor(() => gateway.pubsub.topics()['feed'] === 1, 'the CLI to subscribe');
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
  });

  it('prints every value of a per-subscriber stream and exits 0 when it completes', async () => {
    const { gateway, port } = await resources.gateway();
    gateway.stream('countdown', ({ from }: { from: number }) => {
      const values: number[] = [];
      for (let i = from; i >= 0; i--) values.push(i);
      return of(...values);
    });
    const result = await resources.run([
      'subscribe',
      `ws://127.0.0.1:${port}/rpc`,
      'countdown',
      '{"from": 3}',
    ]);
    expect(result).toMatchObject({ code: 0, stdout: '3\n2\n1\n0\n', stderr: '' });
  });

  it('prints the values, then exits 1 with the error when a stream ends with one', async () => {
    const { gateway, port } = await resources.gateway();
    gateway.stream('failing', () =>
      concat(
        of('a', 'b'),
        throwError(() => new JsonRpcError(-32050, 'feed broke', { at: 2 })),
      ),
    );
    const result = await resources.run(['subscribe', `ws://127.0.0.1:${port}/rpc`, 'failing']);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('"a"\n"b"\n');
    expect(result.stderr).toContain('error -32050: feed broke');
    expect(result.stderr).toContain('data: {"at":2}');
  });

  it('exits 0 on SIGINT while still connecting', async () => {
    // A server that accepts the TCP connection and never answers the upgrade.
    const connected: Socket[] = [];
    const mute: Server = createServer((socket) => connected.push(socket));
    await new Promise<void>((resolve) => mute.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = mute.address() as { port: number };
      const cli = resources.start(['subscribe', `ws://127.0.0.1:${port}/rpc`, 'feed']);
      await waitFor(() => connected.length === 1, 'the CLI to connect');
      cli.child.kill('SIGINT');
      const result = await cli.exited;
      expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    } finally {
      for (const socket of connected) socket.destroy();
      await new Promise((resolve) => mute.close(resolve));
    }
  });

  it('exits 1 with the JSON-RPC error when the subscribe is refused', async () => {
    const { port } = await resources.gateway();
    const result = await resources.run(['subscribe', `ws://127.0.0.1:${port}/rpc`, 'nothing']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^error -32602: /m);
  });

  it('exits 3 when the server closes the connection under a subscription', async () => {
    const { gateway, port } = await resources.gateway();
    gateway.topic('feed');
    const cli = resources.start(['subscribe', `ws://127.0.0.1:${port}/rpc`, 'feed']);
    await waitFor(() => gateway.pubsub.topics()['feed'] === 1, 'the CLI to subscribe');
    await gateway.close();
    const result = await cli.exited;
    expect(result.code).toBe(3);
    expect(result.stderr).toContain('closed the connection');
    expect(result.stderr).toContain('1001');
  });
});

describe('wsrpc subscribe --methods', () => {
  async function ethGateway(): Promise<{ gateway: Gateway<unknown>; url: string }> {
    const { gateway, port } = await resources.gateway({ subscriptionMethods: ETH_METHODS });
    gateway.topic('newHeads');
    return { gateway, url: `ws://127.0.0.1:${port}/rpc` };
  }

  it('uses the given names: prints published messages, and on SIGINT unsubscribes and exits 0', async () => {
    const { gateway, url } = await ethGateway();
    const cli = resources.start([
      'subscribe',
      url,
      'newHeads',
      '--methods',
      'eth_subscribe,eth_subscription,eth_unsubscribe',
    ]);
    await waitFor(() => gateway.pubsub.topics()['newHeads'] === 1, 'the CLI to subscribe');

    await gateway.publish('newHeads', { number: '0x1' });
    await gateway.publish('newHeads', { number: '0x2' });
    await waitFor(() => cli.lines().length === 2, 'two lines on stdout');
    expect(cli.lines()).toEqual(['{"number":"0x1"}', '{"number":"0x2"}']);

    cli.child.kill('SIGINT');
    const result = await cli.exited;
    expect(result).toMatchObject({ code: 0, stderr: '' });
    await waitFor(
      () => (gateway.pubsub.topics()['newHeads'] ?? 0) === 0,
      'the subscription to end',
    );
    // It said eth_unsubscribe before closing (the server answered it), not unsubscribe.
    const calls = await gateway.metrics.registry.getSingleMetricAsString('rpc_calls_total');
    expect(calls).toMatch(/rpc_calls_total\{method="eth_subscribe",outcome="ok"\} 1/);
    expect(calls).toMatch(/rpc_calls_total\{method="eth_unsubscribe",outcome="ok"\} 1/);
    expect(calls).not.toMatch(/method="unsubscribe"/);
  });

  it('without --methods, exits 1 with -32601 and a hint naming --methods', async () => {
    const { url } = await ethGateway();
    const result = await resources.run(['subscribe', url, 'newHeads']);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^error -32601: /m);
    expect(result.stderr).toContain('--methods');
  });

  // Starts the CLI once per case: a harness bound for a loaded machine, not a speed check.
  it(
    'exits 2 for a malformed --methods, or --methods on another command',
    { timeout: 90_000 },
    async () => {
      const { gateway, url } = await ethGateway();
      gateway.method('subtract', subtract);
      for (const methods of [
        'eth_subscribe,eth_subscription',
        'eth_subscribe,eth_subscription,eth_unsubscribe,extra',
        'eth_subscribe,,eth_unsubscribe',
        'eth_subscribe,eth_subscription,',
        ' , , ',
        '',
      ]) {
        const result = await resources.run(['subscribe', url, 'newHeads', '--methods', methods]);
        expect(result.code, `--methods "${methods}"`).toBe(2);
        expect(result.stderr, `--methods "${methods}"`).toContain(ETH_METHODS_EXAMPLE);
        expect(result.stderr, `--methods "${methods}"`).toContain('wsrpc subscribe --help');
      }
      const other = await resources.run([
        'call',
        url,
        'subtract',
        '[42, 23]',
        '--methods',
        'eth_subscribe,eth_subscription,eth_unsubscribe',
      ]);
      expect(other).toMatchObject({ code: 2, stdout: '' });
      expect(other.stderr).toContain('only for subscribe');
      expect(gateway.pubsub.topics()['newHeads'] ?? 0).toBe(0);
    },
  );
});

describe('wsrpc discover over ws://', () => {
  it("prints the server's OpenRPC document", async () => {
    const { gateway, port } = await resources.gateway();
    gateway.serveDiscovery({ openrpc: '1.3.2', info: { title: 't', version: '1' }, methods: [] });
    const result = await resources.run(['discover', `ws://127.0.0.1:${port}/rpc`]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    const document = JSON.parse(result.stdout);
    expect(document).toMatchObject({ openrpc: '1.3.2', methods: [] });
  });

  it('exits 1 with -32601 when the server serves no document', async () => {
    const { port } = await resources.gateway();
    const result = await resources.run(['discover', `ws://127.0.0.1:${port}/rpc`]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('error -32601');
  });
});
