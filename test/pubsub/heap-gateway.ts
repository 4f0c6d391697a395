/**
 * A gateway in a child process whose heap a test measures (topic-limits.test.ts bundles this
 * file with the current src/ and runs it with `node --expose-gc`). It declares `prices.*` and
 * `priv.*`, allows 200 connections per address (the test opens 100 and a control one), prints
 * `{"listening":port}`, and answers `heap.used`: the heap in bytes after full collections.
 */
import { createGateway, createLogger } from '../../src/index.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');

const gateway = createGateway({
  logger: createLogger({ level: 'error' }),
  heartbeatIntervalMs: 0,
  limits: { maxConnectionsPerIp: 200, connectionsPerSecondPerIp: 0 },
});
gateway.topic('prices.*');
gateway.topic('priv.*');
gateway.method('heap.used', () => {
  for (let i = 0; i < 4; i++) gc();
  return process.memoryUsage().heapUsed;
});
const address = await gateway.listen(0, '127.0.0.1');
process.stdout.write(`${JSON.stringify({ listening: address.port })}\n`);
