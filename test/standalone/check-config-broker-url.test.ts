// broker.url is checked when the file is, as the broker's client takes it: the scheme, and a URL
// the parser takes, each server of a NATS list; NATS only over nats:// or tls:// (its Node client
// has no WebSocket). check-config and serve refuse it naming broker.url (never REDIS_URL or
// NATS_URL, which the user did not set), its password masked. The built CLI (`npm run build`).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { runGatewayCommand } from './gateway-command.js';
import { brokerFromEnv } from '../../src/server/broker-from-env.js';

const dir = mkdtempSync(join(tmpdir(), 'check-config-broker-url-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
function run(command: 'check-config' | 'serve', kind: string, url: string) {
  const path = join(dir, `${files++}.yaml`);
  writeFileSync(
    path,
    `listen: { host: 127.0.0.1, port: 0 }\nbroker: { kind: ${kind}, url: ${JSON.stringify(url)} }\n`,
  );
  return runGatewayCommand(command, path);
}

it.each([
  [
    'redis',
    'redis://:pw@[bad',
    'broker.url must be a redis:// or rediss:// URL, not "redis://***@[bad"',
  ],
  [
    'nats',
    'nats://127.0.0.1:4222,http://b',
    'broker.url must be a nats:// or tls:// URL, not "http://b"',
  ],
  [
    'nats',
    'nats://127.0.0.1:4222, nats://:pw@[bad',
    'broker.url must be a nats:// or tls:// URL, not "nats://***@[bad"',
  ],
  [
    'nats',
    'ws://127.0.0.1:4222',
    'broker.url must be a nats:// or tls:// URL, not "ws://127.0.0.1:4222"',
  ],
  [
    'nats',
    'wss://127.0.0.1:4222',
    'broker.url must be a nats:// or tls:// URL, not "wss://127.0.0.1:4222"',
  ],
])('check-config: %s %s is a problem naming broker.url, exit 1', (kind, url, problem) => {
  const { code, stdout, stderr, path } = run('check-config', kind, url);
  expect(stdout).toBe('');
  expect(stderr).toBe(`${path}: ${problem}\n${path}: 1 problem\n`);
  expect(code).toBe(1);
});

it('check-config: a list of NATS servers, nats:// and tls://, is ok', () => {
  const { code, stderr } = run('check-config', 'nats', 'nats://127.0.0.1:4222, tls://b:4222');
  expect(stderr).toBe('');
  expect(code).toBe(0);
});

it('serve: a broker.url its client cannot take is refused naming broker.url, exit 1', () => {
  const { code, stderr, path } = run('serve', 'redis', 'redis://:pw@[bad');
  expect(stderr).toBe(
    `${path}: broker.url must be a redis:// or rediss:// URL, not "redis://***@[bad"\n`,
  );
  expect(code).toBe(1);
});

it.each(['ws://127.0.0.1:4222', 'nats://127.0.0.1:4222,wss://b:443'])(
  'brokerFromEnv: NATS_URL=%s is refused naming NATS_URL before connecting',
  async (url) => {
    await expect(brokerFromEnv({ BROKER: 'nats', NATS_URL: url })).rejects.toThrow(
      /^NATS_URL must be a nats:\/\/ or tls:\/\/ URL, not "wss?:\/\//,
    );
  },
);
