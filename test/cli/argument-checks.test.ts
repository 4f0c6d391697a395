/**
 * Bad arguments are usage errors (exit 2, docs/cli.md), found before anything is sent, and the
 * message never shows what may be a secret: a URL fragment (never sent to a server) on ws://,
 * http:// and tcp:// alike; a --timeout that is not decimal digits (Number() would read `0x10`,
 * `1e3`, `0b11`); a mistyped -H or --protocol, named by position and length, not echoed (it may
 * hold a token); credentials in a tcp:// or tls:// URL, which TCP has nowhere to send; a URL
 * refused as written, quoted with its userinfo and query string masked. No server
 * listens at these URLs: a usage error never connects. Through the built CLI.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/network.js';
import { CliResources, ensureCliBuilt } from './cli-harness.js';

const resources = new CliResources();
beforeAll(ensureCliBuilt, 180_000);
afterEach(() => resources.cleanup());

const SECRET = 's3cr3t-T0KEN';

async function usageError(args: string[]): Promise<string> {
  const result = await resources.run(args);
  expect(result.stdout).toBe('');
  expect(result.stderr).not.toContain('unexpected failure');
  expect(result.code, result.stderr).toBe(2);
  expect(result.stderr).toMatch(/Run 'wsrpc call --help' for usage\.\n$/);
  return result.stderr;
}

describe('a URL fragment', () => {
  it.each(['ws', 'http', 'tcp'])('on %s:// is a usage error', async (scheme) => {
    const port = await freePort();
    for (const fragment of ['#part', '#']) {
      const stderr = await usageError(['call', `${scheme}://127.0.0.1:${port}/${fragment}`, 'x']);
      expect(stderr).toContain('the URL has a fragment');
    }
  });
});

describe('--timeout', () => {
  it.each(['0x10', '1e3', '0b11', '0o7', ' 5', '5.0', '-1', '+5', ''])(
    '%j is a usage error: decimal digits only',
    async (timeout) => {
      const port = await freePort();
      const stderr = await usageError([
        'call',
        `ws://127.0.0.1:${port}/rpc`,
        'x',
        `--timeout=${timeout}`,
      ]);
      expect(stderr).toContain('--timeout takes a whole number of milliseconds');
    },
  );
});

describe('what may hold a secret is not echoed', () => {
  it('a -H without a header name: named by position and length', async () => {
    const port = await freePort();
    const header = `Bearer ${SECRET}`;
    const stderr = await usageError([
      'call',
      `ws://127.0.0.1:${port}/rpc`,
      'x',
      '-H',
      'X-Trace: 1',
      '-H',
      header,
    ]);
    expect(stderr).not.toContain(SECRET);
    expect(stderr).toContain(`the 2nd -H (${header.length} characters`);
  });

  it('a -H value with a control character: named by its header name only', async () => {
    const port = await freePort();
    const stderr = await usageError([
      'call',
      `http://127.0.0.1:${port}/rpc`,
      'x',
      '-H',
      `Authorization: Bearer ${SECRET}\r\nX-Forged: 1`,
    ]);
    expect(stderr).not.toContain(SECRET);
    expect(stderr).toContain('-H Authorization:');
  });

  it('a --protocol that is not a subprotocol name: named by position and length', async () => {
    const port = await freePort();
    const protocol = `token ${SECRET}`;
    const stderr = await usageError([
      'call',
      `ws://127.0.0.1:${port}/rpc`,
      'x',
      '--protocol',
      protocol,
    ]);
    expect(stderr).not.toContain(SECRET);
    expect(stderr).toContain(`the 1st --protocol (${protocol.length} characters`);
  });

  it('an unquoted -H whose token became arguments of their own: counted, not shown', async () => {
    const port = await freePort();
    const stderr = await usageError([
      'call',
      `ws://127.0.0.1:${port}/rpc`,
      'x',
      '-H',
      'X-Trace: 1',
      'Bearer',
      SECRET,
    ]);
    expect(stderr).not.toContain(SECRET);
    expect(stderr).toContain('too many arguments (1 more than call takes');
  });

  it.each([
    `ws://user:${SECRET}@[bad/rpc`,
    `ws://user:pa/${SECRET}@127.0.0.1/rpc`,
    `ws://user:pa#${SECRET}@127.0.0.1:99999/rpc`,
    `ftp://user:${SECRET}@127.0.0.1/rpc`,
    `user:${SECRET}@127.0.0.1/rpc`,
    `ftp://127.0.0.1/rpc?token=${SECRET}`,
    `ws://127.0.0.1:99999/rpc?token=${SECRET}`,
    `ws://[bad/rpc#access_token=${SECRET}`,
  ])('a URL refused as written (%s) is quoted without its credentials', async (url) => {
    const stderr = await usageError(['call', url, 'x']);
    expect(stderr).not.toContain(SECRET);
    expect(stderr).toMatch(/is not a URL|must start with ws:\/\//);
    expect(stderr).toContain('***');
  });

  it.each(['tcp', 'tls'])('credentials in a %s:// URL: refused, not shown', async (scheme) => {
    const port = await freePort();
    for (const userinfo of [`user:${SECRET}`, SECRET]) {
      const stderr = await usageError(['call', `${scheme}://${userinfo}@127.0.0.1:${port}`, 'x']);
      expect(stderr).not.toContain(SECRET);
      expect(stderr).toContain(`${scheme}:// URLs cannot carry credentials`);
    }
  });
});
