/**
 * `--timeout` bounds the whole command, the close included: against a server that stops
 * answering (and so never answers the close either), `call` ends within the limit rather than
 * waiting the close's own grace (2 s) after it, over ws:// and tcp://; `notify` over tcp://
 * waits for the server to close only within the limit. Timed from the server's side of the
 * connection to the CLI's exit; the bounds are generous (the limit plus 1.3 s, for a loaded
 * 2-core machine) and only prove the command ends within the limit: waiting out the grace
 * after it takes 2 s or more from the connection.
 */
import { expect, it } from 'vitest';
import { answeringTcp, cliWithServers, silentWs } from './raw-servers.js';

const { resources, cleanups } = cliWithServers();

/** The limit plus room for a loaded machine, well under the 2 s grace the close would wait. */
const SLACK_MS = 1_300;

/** Run the CLI; how long from the server's connection to its exit, and how it ended. */
async function timedRun(
  args: (connected: () => void) => Promise<string[]>,
): Promise<{ code: number | null; stderr: string; afterConnectMs: number }> {
  let connectedAt: number | undefined;
  const argv = await args(() => (connectedAt ??= Date.now()));
  const result = await resources.run(argv);
  const exitedAt = Date.now();
  expect(connectedAt, 'the CLI connected').toBeDefined();
  return { code: result.code, stderr: result.stderr, afterConnectMs: exitedAt - connectedAt! };
}

it('call over ws:// to a server gone silent ends within --timeout 500', async () => {
  const run = await timedRun(async (connected) => {
    const url = await silentWs(cleanups, connected);
    return ['call', url, 'x', '--timeout', '500'];
  });
  expect(run.code).toBe(3);
  expect(run.stderr).toContain('no answer to "x"');
  expect(run.afterConnectMs).toBeLessThan(500 + SLACK_MS);
});

it('call over tcp:// to a server that never answers nor closes ends within --timeout 500', async () => {
  const run = await timedRun(async (connected) => {
    const url = await answeringTcp(cleanups, () => undefined, { connected, holdOpen: true });
    return ['call', url, 'x', '--timeout', '500'];
  });
  expect(run.code).toBe(3);
  expect(run.stderr).toContain('no answer to "x"');
  expect(run.afterConnectMs).toBeLessThan(500 + SLACK_MS);
});

it('notify over tcp:// to a server that never closes ends within --timeout 300', async () => {
  const seen: string[] = [];
  const run = await timedRun(async (connected) => {
    const url = await answeringTcp(
      cleanups,
      (line) => {
        seen.push(line);
        return undefined;
      },
      { connected, holdOpen: true },
    );
    return ['notify', url, 'record', '[1]', '--timeout', '300'];
  });
  // Sent and left: the server not closing after it is no failure (as after the grace).
  expect(run).toMatchObject({ code: 0, stderr: '' });
  expect(seen).toHaveLength(1);
  expect(run.afterConnectMs).toBeLessThan(300 + SLACK_MS);
});
