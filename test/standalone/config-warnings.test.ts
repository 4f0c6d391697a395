// What a configuration allows but almost never means is started with a warning: trustedProxies
// with a /0 subnet (0.0.0.0/0, ::/0) believes every peer's X-Forwarded-For, so any client can
// claim any address. serve logs it at start (and starts); check-config prints it (and passes).
import { expect, it } from 'vitest';
import { serve } from '../../src/standalone/serve.js';
import { resolveStandaloneConfig } from '../../src/standalone/standalone-config.js';
import { captureLogger } from '../support/logging.js';

const everyPeer = (entry: string): string =>
  `trustedProxies: "${entry}" trusts every peer's X-Forwarded-For, so any client can claim any address (per-address limits, rate buckets, logs); list the proxies' own addresses or subnets`;

it('trustedProxies with a /0 subnet: serve starts, with a warning per such entry', async () => {
  const config = resolveStandaloneConfig({
    listen: { host: '127.0.0.1', port: 0 },
    trustedProxies: ['10.0.0.0/8', '0.0.0.0/0', ' ::/0 ', '::1'],
  });
  const { logger, records } = captureLogger();
  const server = await serve(config, { logger });
  try {
    const warnings = records.filter((record) => record.level === 'warn').map((r) => r.msg);
    expect(warnings).toEqual([everyPeer('0.0.0.0/0'), everyPeer(' ::/0 ')]);
  } finally {
    await server.close();
  }
});

it('trustedProxies naming proxies: no warning', async () => {
  const config = resolveStandaloneConfig({
    listen: { host: '127.0.0.1', port: 0 },
    trustedProxies: ['10.0.0.0/8', 'fd00::/8', '127.0.0.1', '0.0.0.0/1'],
  });
  const { logger, records } = captureLogger();
  const server = await serve(config, { logger });
  try {
    expect(records.filter((record) => record.level === 'warn')).toEqual([]);
  } finally {
    await server.close();
  }
});
