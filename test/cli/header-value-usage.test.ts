/**
 * Bad arguments are usage errors (exit 2, naming the option, docs/cli.md), not failures that
 * look like the server's: a `-H` value with a character a header cannot carry (a carriage
 * return), and a `--protocol` that is not a subprotocol name (an HTTP token).
 */
import { afterEach, beforeAll, expect, it } from 'vitest';
import { CliResources, ensureCliBuilt } from './cli-harness.js';

const resources = new CliResources();
beforeAll(ensureCliBuilt, 120_000);
afterEach(() => resources.cleanup());

it.each([
  ['ws', ['-H', 'X-Trace: a\rb'], '-H'],
  ['http', ['-H', 'X-Trace: a\rb'], '-H'],
  ['ws', ['--protocol', 'a b'], '--protocol'],
])('%s %j: a usage error naming the option', async (scheme, extra, option) => {
  const { port } = await resources.gateway();
  const result = await resources.run([
    'call',
    `${scheme}://127.0.0.1:${port}/rpc`,
    'rpc.ping',
    ...extra,
  ]);
  expect(result.stderr).not.toContain('unexpected failure');
  expect(result.code).toBe(2);
  expect(result.stderr).toContain(option);
});
