/**
 * `--timeout` is at most 2^31 - 1 ms (about 24.8 days, the longest a timer waits; a longer one
 * would fire at once): past it, a usage error (exit 2) naming the bound, before anything is
 * sent. At the bound, the call is answered as ever.
 */
import { afterEach, beforeAll, expect, it } from 'vitest';
import { CliResources, ensureCliBuilt } from './cli-harness.js';

const resources = new CliResources();
beforeAll(ensureCliBuilt, 120_000);
afterEach(() => resources.cleanup());

it.each(['ws', 'http'])('--timeout past 2^31 - 1 ms over %s: a usage error', async (scheme) => {
  const { port } = await resources.gateway();
  const url = `${scheme}://127.0.0.1:${port}/rpc`;
  const refused = await resources.run(['call', url, 'rpc.ping', '--timeout', '3000000000']);
  expect(refused.code).toBe(2);
  expect(refused.stderr).toContain('--timeout is at most 2147483647 ms');
  expect(refused.stderr).not.toContain('TimeoutOverflowWarning');
  const kept = await resources.run(['call', url, 'rpc.ping', '--timeout', '2147483647']);
  expect(kept.code).toBe(0);
  expect(kept.stderr).not.toContain('TimeoutOverflowWarning');
});
