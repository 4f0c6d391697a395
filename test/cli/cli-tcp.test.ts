import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { UpgradeRejection } from '../../src/index.js';
import type { Gateway, GatewayOptions } from '../../src/index.js';
import { freePort } from '../support/network.js';
import { makeSelfSignedCertificate } from '../support/tls.js';
import type { TestCertificate } from '../support/tls.js';
import { CliResources, ensureCliBuilt, waitFor } from './cli-harness.js';

const resources = new CliResources();
let certificate: TestCertificate;

beforeAll(async () => {
  certificate = makeSelfSignedCertificate();
  await ensureCliBuilt();
}, 180_000);
afterEach(() => resources.cleanup());
afterAll(() => certificate?.remove());

function subtract([a, b]: [number, number]): number {
  return a - b;
}

/** A gateway on listenTcp with `subtract`, and its tcp:// URL. */
async function tcpGateway(
  options: GatewayOptions<unknown> = {},
): Promise<{ gateway: Gateway<unknown>; port: number; url: string }> {
  const { gateway, port } = await resources.tcpGateway(options);
  gateway.method('subtract', subtract);
  return { gateway, port, url: `tcp://127.0.0.1:${port}` };
}

describe('wsrpc over tcp://', () => {
  it('call prints the result (spec example) and exits 0', async () => {
    const { url } = await tcpGateway();
    const result = await resources.run(['call', url, 'subtract', '[42, 23]']);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toBe(19);
  });

  it('a JSON-RPC error exits 1 with "error CODE: MESSAGE"', async () => {
    const { url } = await tcpGateway();
    const result = await resources.run(['call', url, 'nope']);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('error -32601: Method not found');
  });

  it('notify prints nothing and exits 0; the server saw it', async () => {
    const { gateway, url } = await tcpGateway();
    const seen: unknown[] = [];
    gateway.method('record', (params) => {
      seen.push(params);
    });
    const result = await resources.run(['notify', url, 'record', '{"x": 1}']);
    expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    await waitFor(() => seen.length === 1, 'the server to see the notification');
    expect(seen).toEqual([{ x: 1 }]);
  });

  it('subscribe prints each published message as a line, and on SIGINT unsubscribes and exits 0', async () => {
    const { gateway, url } = await tcpGateway();
    gateway.topic('feed');
    const cli = resources.start(['subscribe', url, 'feed']);
    await waitFor(() => gateway.pubsub.topics()['feed'] === 1, 'the CLI to subscribe');

    await gateway.publish('feed', { n: 1 });
    await gateway.publish('feed', 'two');
    await waitFor(() => cli.lines().length === 2, 'two lines on stdout');
    expect(cli.lines()).toEqual(['{"n":1}', '"two"']);

    cli.child.kill('SIGINT');
    const result = await cli.exited;
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    await waitFor(() => (gateway.pubsub.topics()['feed'] ?? 0) === 0, 'the subscription to end');
    const calls = await gateway.metrics.registry.getSingleMetricAsString('rpc_calls_total');
    expect(calls).toMatch(/rpc_calls_total\{method="unsubscribe",outcome="ok"\} 1/);
  });

  it('discover prints the OpenRPC document', async () => {
    const { gateway, url } = await tcpGateway();
    gateway.serveDiscovery({ openrpc: '1.3.2', info: { title: 't', version: '1' }, methods: [] });
    const result = await resources.run(['discover', url]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toMatchObject({ openrpc: '1.3.2', methods: [] });
  });

  it('exits 3 with "connection refused" when nothing listens', async () => {
    const port = await freePort();
    const result = await resources.run(['call', `tcp://127.0.0.1:${port}`, 'subtract', '[1, 2]']);
    expect(result.code).toBe(3);
    expect(result.stderr).toContain(`cannot connect to 127.0.0.1:${port}: connection refused`);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it('a connection refused by the authenticate hook exits 3 saying the server refused it and why', async () => {
    const transports: string[] = [];
    const { url } = await tcpGateway({
      authenticate: ({ transport }: { transport: string }) => {
        transports.push(transport);
        if (transport === 'tcp') throw new UpgradeRejection(403);
        return {};
      },
    });
    for (const args of [
      ['call', url, 'subtract', '[42, 23]'],
      ['notify', url, 'subtract', '[42, 23]'],
      ['subscribe', url, 'feed'],
    ]) {
      const result = await resources.run(args);
      expect(result.code, args[0]).toBe(3);
      expect(result.stdout, args[0]).toBe('');
      expect(result.stderr, args[0]).toContain('refused the connection');
      expect(result.stderr, args[0]).toContain('Forbidden');
      expect(result.stderr, args[0]).toContain('403');
      expect(result.stderr, args[0]).not.toMatch(/\n\s+at /);
    }
    expect(transports).toEqual(['tcp', 'tcp', 'tcp']);
  });

  it('-H and --protocol exit 2: TCP carries no headers', async () => {
    for (const option of [
      ['-H', 'Authorization: Bearer TOKEN'],
      ['--protocol', 'token'],
    ]) {
      const result = await resources.run(['call', 'tcp://127.0.0.1:1', 'subtract', ...option]);
      expect(result.code, option[0]).toBe(2);
      expect(result.stderr, option[0]).toContain('TCP carries no headers');
      expect(result.stderr, option[0]).toContain('--help');
    }
  });

  it('a tcp:// URL without a port exits 2', async () => {
    const result = await resources.run(['call', 'tcp://127.0.0.1', 'subtract']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('need a host and a port');
  });
});

describe('wsrpc over tls://', () => {
  async function tlsGateway(): Promise<{ gateway: Gateway<unknown>; url: string }> {
    const { gateway, port } = await resources.tcpGateway({
      tls: { cert: certificate.cert, key: certificate.key },
    });
    gateway.method('subtract', subtract);
    return { gateway, url: `tls://localhost:${port}` };
  }

  it('call with --cacert FILE succeeds', async () => {
    const { url } = await tlsGateway();
    const result = await resources.run([
      'call',
      url,
      'subtract',
      '[42, 23]',
      '--cacert',
      certificate.certFile,
    ]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toBe(19);
  });

  it('without --cacert exits 3 naming the certificate, --cacert and --insecure', async () => {
    const { url } = await tlsGateway();
    const result = await resources.run(['call', url, 'subtract', '[42, 23]']);
    expect(result.code).toBe(3);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('certificate');
    expect(result.stderr).toContain('--cacert');
    expect(result.stderr).toContain('--insecure');
  });

  it('-k accepts the self-signed certificate', async () => {
    const { url } = await tlsGateway();
    const result = await resources.run(['call', url, 'subtract', '[42, 23]', '-k']);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toBe(19);
  });

  it('subscribe works over TLS with --cacert', async () => {
    const { gateway, url } = await tlsGateway();
    gateway.topic('feed');
    const cli = resources.start(['subscribe', url, 'feed', '--cacert', certificate.certFile]);
    await waitFor(() => gateway.pubsub.topics()['feed'] === 1, 'the CLI to subscribe');
    await gateway.publish('feed', { secure: true });
    await waitFor(() => cli.lines().length === 1, 'a line on stdout');
    expect(cli.lines()).toEqual(['{"secure":true}']);
    cli.child.kill('SIGINT');
    expect((await cli.exited).code).toBe(0);
  });
});

describe('wsrpc help mentions tcp:// and tls://', () => {
  it('in the general help and per command', async () => {
    const general = await resources.run(['--help']);
    expect(general.stdout).toContain('tcp://');
    expect(general.stdout).toContain('tls://');
    for (const command of ['call', 'notify', 'subscribe', 'discover']) {
      const help = await resources.run([command, '--help']);
      expect(help.stdout, command).toContain('tcp://');
    }
  });
});
