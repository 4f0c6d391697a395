import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { UpgradeRejection } from '../../src/index.js';
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

describe('wsrpc over http:// (POST)', () => {
  it('call prints the result and exits 0', async () => {
    const { gateway, port } = await resources.gateway();
    gateway.method('subtract', subtract);
    const result = await resources.run([
      'call',
      `http://127.0.0.1:${port}/rpc`,
      'subtract',
      '[42, 23]',
    ]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toBe(19);
  });

  it('a JSON-RPC error exits 1 with "error CODE: MESSAGE"', async () => {
    const { port } = await resources.gateway();
    const result = await resources.run(['call', `http://127.0.0.1:${port}/rpc`, 'nope']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('error -32601: Method not found');
  });

  it('notify is accepted (204), prints nothing and exits 0; the server saw it', async () => {
    const { gateway, port } = await resources.gateway();
    const seen: unknown[] = [];
    gateway.method('record', (params) => {
      seen.push(params);
    });
    const result = await resources.run([
      'notify',
      `http://127.0.0.1:${port}/rpc`,
      'record',
      '{"x": 1}',
    ]);
    expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    await waitFor(() => seen.length === 1, 'the server to see the notification');
    expect(seen).toEqual([{ x: 1 }]);
  });

  it('discover prints the OpenRPC document', async () => {
    const { gateway, port } = await resources.gateway();
    gateway.serveDiscovery({ openrpc: '1.3.2', info: { title: 't', version: '1' }, methods: [] });
    const result = await resources.run(['discover', `http://127.0.0.1:${port}/rpc`]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toMatchObject({ openrpc: '1.3.2', methods: [] });
  });

  it('a refused POST exits 3 mentioning 401 and -H; with -H it succeeds', async () => {
    const { gateway, port } = await resources.gateway({
      authenticate: ({ headers }) => {
        if (headers.authorization !== 'Bearer secret') {
          throw new UpgradeRejection(401, 'A valid token is required');
        }
        return {};
      },
    });
    gateway.method('subtract', subtract);
    const url = `http://127.0.0.1:${port}/rpc`;
    const refused = await resources.run(['call', url, 'subtract', '[42, 23]']);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain('authentication rejected');
    expect(refused.stderr).toContain('401');
    expect(refused.stderr).toContain('A valid token is required');
    expect(refused.stderr).toContain("-H 'Authorization: Bearer");

    const allowed = await resources.run([
      'call',
      url,
      'subtract',
      '[42, 23]',
      '--header',
      'Authorization: Bearer secret',
    ]);
    expect(allowed).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(allowed.stdout)).toBe(19);
  });

  it('a wrong path exits 3 mentioning 404', async () => {
    const { port } = await resources.gateway();
    const result = await resources.run(['call', `http://127.0.0.1:${port}/nowhere`, 'x']);
    expect(result.code).toBe(3);
    expect(result.stderr).toContain('404');
  });
});

describe('wsrpc over https:// and wss://', () => {
  async function tlsGateway(): Promise<number> {
    const { gateway, port } = await resources.gateway({
      tls: { cert: certificate.cert, key: certificate.key },
    });
    gateway.method('subtract', subtract);
    return port;
  }

  for (const scheme of ['https', 'wss']) {
    it(`${scheme}: call with --cacert FILE succeeds`, async () => {
      const port = await tlsGateway();
      const result = await resources.run([
        'call',
        `${scheme}://localhost:${port}/rpc`,
        'subtract',
        '[42, 23]',
        '--cacert',
        certificate.certFile,
      ]);
      expect(result).toMatchObject({ code: 0, stderr: '' });
      expect(JSON.parse(result.stdout)).toBe(19);
    });

    it(`${scheme}: without --cacert exits 3 naming the certificate, --cacert and --insecure`, async () => {
      const port = await tlsGateway();
      const result = await resources.run([
        'call',
        `${scheme}://localhost:${port}/rpc`,
        'subtract',
        '[42, 23]',
      ]);
      expect(result.code).toBe(3);
      expect(result.stderr).toContain('certificate');
      expect(result.stderr).toContain('--cacert');
      expect(result.stderr).toContain('--insecure');
      expect(result.stdout).toBe('');
    });

    it(`${scheme}: -k accepts the self-signed certificate`, async () => {
      const port = await tlsGateway();
      const result = await resources.run([
        'call',
        `${scheme}://localhost:${port}/rpc`,
        'subtract',
        '[42, 23]',
        '-k',
      ]);
      expect(result).toMatchObject({ code: 0, stderr: '' });
      expect(JSON.parse(result.stdout)).toBe(19);
    });
  }

  it('wss: subscribe works over TLS with --cacert', async () => {
    const { gateway, port } = await resources.gateway({
      tls: { cert: certificate.cert, key: certificate.key },
    });
    gateway.topic('feed');
    const cli = resources.start([
      'subscribe',
      `wss://localhost:${port}/rpc`,
      'feed',
      '--cacert',
      certificate.certFile,
    ]);
    await waitFor(() => gateway.pubsub.topics()['feed'] === 1, 'the CLI to subscribe');
    await gateway.publish('feed', { secure: true });
    await waitFor(() => cli.lines().length === 1, 'a line on stdout');
    expect(cli.lines()).toEqual(['{"secure":true}']);
    cli.child.kill('SIGINT');
    expect((await cli.exited).code).toBe(0);
  });
});
