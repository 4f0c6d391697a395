// brokerFromEnv checks REDIS_URL as a configuration file's broker.url is checked (redis:// or
// rediss://, a URL the parser takes): a typo such as `localhost:6380x` or `redis//typo-host:6379`
// is refused at once, naming REDIS_URL, instead of a bare "Invalid URL" or a connect attempt to a
// unix socket.
import { expect, it } from 'vitest';
import { brokerFromEnv } from '../../src/server/broker-from-env.js';

it.each(['redis//typo-host:6379', 'localhost:6380x'])(
  'REDIS_URL=%s is refused naming REDIS_URL',
  async (url) => {
    const settled = brokerFromEnv({ BROKER: 'redis', REDIS_URL: url }).then(
      async (broker) => {
        await broker?.close();
        return 'connected';
      },
      (err: Error) => err.message,
    );
    const outcome = await Promise.race([
      settled,
      new Promise<string>((resolve) => setTimeout(() => resolve('still pending'), 8_000)),
    ]);
    expect(outcome).toMatch(/REDIS_URL/);
  },
  20_000,
);
