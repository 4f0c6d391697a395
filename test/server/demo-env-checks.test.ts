// The demo (`npm start`: node dist/demo/main.js) checks each environment variable it reads before
// anything starts: a value that is not usable is one line on stderr naming the variable, exit 1,
// no stack trace; a number that is not one is refused, never read as 0. tlsFromEnv names the
// variable of a file it cannot read or a PEM it cannot use. The built demo (`npm run build`).
import { spawn } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { tlsFromEnv } from '../../src/server/tls-from-env.js';
import { ensureBuilt, exitOf, mainJs, root } from '../support/demo-process.js';
import { killChild } from '../support/processes.js';
import { makeSelfSignedCertificate } from '../support/tls.js';
import type { TestCertificate } from '../support/tls.js';
import { within } from '../support/waiting.js';

let one: TestCertificate;
let other: TestCertificate;
beforeAll(async () => {
  await ensureBuilt();
  one = makeSelfSignedCertificate();
  other = makeSelfSignedCertificate();
});
afterAll(() => {
  one?.remove();
  other?.remove();
});

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
});

/** The demo with `env` over a loopback free port: its exit code, stdout and stderr. */
async function demo(env: Record<string, string>) {
  const child = spawn(process.execPath, [mainJs], {
    cwd: root,
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  stops.push(() => killChild(child));
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const { code } = await within(exitOf(child), `the demo to exit with ${JSON.stringify(env)}`);
  return { code, stdout, stderr };
}

const integer = (
  name: string,
  max: number,
  min = 0,
  shown = 'abc',
): [Record<string, string>, string] => [
  { [name]: shown },
  `${name} must be an integer from ${min} to ${max}, not "${shown}"`,
];

describe('the demo refuses a variable it cannot use, naming it, exit 1', () => {
  it.each([
    integer('PORT', 65_535),
    integer('PORT', 65_535, 0, '70000'),
    integer('TCP_PORT', 65_535),
    integer('DRAIN_DEADLINE_MS', 2_147_483_647),
    integer('DRAIN_DEADLINE_MS', 2_147_483_647, 0, '-1'),
    integer('DEMO_TOKEN_TTL_MS', 2_147_483_647, 1),
    integer('TICK_MS', 2_147_483_647, 1, '1.5'),
    [
      { TRUSTED_PROXIES: '10.0.0.1, 10.0.0.0/33' },
      'TRUSTED_PROXIES: "10.0.0.0/33" is not an IP address or CIDR subnet (e.g. 10.0.0.0/8, fd00::/8)',
    ],
    [
      { LOG_LEVEL: 'verbose' },
      'LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent, not "verbose"',
    ],
    [{ BROKER: 'foo' }, 'BROKER must be memory, redis or nats, not "foo"'],
    [
      { BROKER: 'nats', NATS_URL: 'ws://127.0.0.1:4222' },
      'NATS_URL must be a nats:// or tls:// URL, not "ws://127.0.0.1:4222"',
    ],
    [
      { TLS_CERT_FILE: '/nonexistent/cert.pem', TLS_KEY_FILE: '/nonexistent/key.pem' },
      "TLS_CERT_FILE: cannot read /nonexistent/cert.pem: ENOENT: no such file or directory, open '/nonexistent/cert.pem'",
    ],
  ])('%j', async (env, message) => {
    const { code, stdout, stderr } = await demo(env);
    expect(stderr).toBe(`demo: ${message}\n`);
    expect(stdout).toBe('');
    expect(code).toBe(1);
  });

  it.each([
    [
      'a key that is not the certificate’s',
      () => ({ TLS_CERT_FILE: one.certFile, TLS_KEY_FILE: other.keyFile }),
      'TLS_KEY_FILE is not the key of the certificate of TLS_CERT_FILE: ',
    ],
    [
      'a certificate file given as the key',
      () => ({ TLS_CERT_FILE: one.certFile, TLS_KEY_FILE: one.certFile }),
      'TLS_KEY_FILE is not a usable PEM private key: ',
    ],
    [
      'a key file given as the certificate',
      () => ({ TLS_CERT_FILE: one.keyFile, TLS_KEY_FILE: one.keyFile }),
      'TLS_CERT_FILE is not a usable PEM certificate: ',
    ],
  ])('TLS: %s', async (_name, env, message) => {
    const { code, stdout, stderr } = await demo(env());
    expect(stderr.startsWith(`demo: ${message}`)).toBe(true);
    expect(stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(stdout).toBe('');
    expect(code).toBe(1);
  });
});

describe('tlsFromEnv', () => {
  it('names the variable of a file it cannot read', () => {
    expect(() =>
      tlsFromEnv({ TLS_CERT_FILE: one.certFile, TLS_KEY_FILE: '/nonexistent/key.pem' }),
    ).toThrow(
      "TLS_KEY_FILE: cannot read /nonexistent/key.pem: ENOENT: no such file or directory, open '/nonexistent/key.pem'",
    );
  });

  it('takes a certificate and its key, from files or as text', () => {
    expect(tlsFromEnv({ TLS_CERT_FILE: one.certFile, TLS_KEY_FILE: one.keyFile })).toEqual({
      cert: one.cert,
      key: one.key,
    });
    expect(tlsFromEnv({ TLS_CERT: one.cert, TLS_KEY: one.key })).toEqual({
      cert: one.cert,
      key: one.key,
    });
    expect(tlsFromEnv({ TLS_CERT: '', TLS_KEY_FILE: '' })).toBeUndefined();
  });
});
