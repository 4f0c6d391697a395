/**
 * An answer that is not a JSON-RPC response ends `call` the same way over ws://, tcp:// and
 * http://: exit 3 (the server could not be talked to, not exit 1 as if it had answered with an
 * error), saying the answer is not a JSON-RPC response and quoting it safe for a terminal, at
 * once rather than at the timeout. Against servers that answer so, over real sockets, through
 * the built CLI; the --timeout is long, so an answer waited out fails the test by its own limit.
 */
import { expect, it } from 'vitest';
import { answeringHttp, answeringTcp, answeringWs, cliWithServers, idOf } from './raw-servers.js';
import type { Answer, Cleanups } from './raw-servers.js';

const { resources, cleanups } = cliWithServers();

const servers: Record<string, (cleanups: Cleanups, answer: Answer) => Promise<string>> = {
  ws: answeringWs,
  tcp: answeringTcp,
  http: answeringHttp,
};

/** Answers to the call, each with how the message quotes it (escaped where it must be). */
const answers: readonly [string, (id: string) => string, string][] = [
  [
    'neither result nor error',
    (id) => `{"jsonrpc":"2.0","id":${id}}`,
    '{"jsonrpc":"2.0","id":1} (neither "result" nor "error")',
  ],
  [
    'both result and error',
    (id) =>
      `{"jsonrpc":"2.0","id":${id},"result":1,"error":{"code":-32603,"message":"Malformed response"}}`,
    '{"jsonrpc":"2.0","id":1,"result":1,"error":{',
  ],
  [
    'not JSON, with an escape sequence',
    () => 'hello \u001b[2Jworld',
    'hello \\u001b[2Jworld (not JSON)',
  ],
];

const cases = Object.keys(servers).flatMap((scheme) =>
  answers.map(([what, answer, quoted]) => [scheme, what, answer, quoted] as const),
);

it.each(cases)('%s, an answer with %s: exit 3, quoted', async (scheme, _what, answer, quoted) => {
  const url = await servers[scheme]!(cleanups, (text) => answer(idOf(text)));
  const result = await resources.run(['call', url, 'foo', '--timeout', '60000']);
  expect(result.stdout).toBe('');
  expect(result.stderr).toMatch(
    /^wsrpc: 127\.0\.0\.1:\d+ answered (200 )?but not with a JSON-RPC response: /,
  );
  expect(result.stderr).toContain(`a JSON-RPC response: ${quoted}`);
  expect(result.stderr).not.toContain('\u001b');
  expect(result.code).toBe(3);
});

/*
 * A notification has no answer, but a server that sends one that is no JSON-RPC message before
 * it closes has said it does not speak the protocol: `notify` is told so as `call` is, over the
 * sockets that wait for the server's close (ws:// and tcp://).
 */
it.each(['ws', 'tcp'])(
  '%s, notify answered with text that is not JSON-RPC: exit 3, quoted',
  async (scheme) => {
    const url = await servers[scheme]!(cleanups, () => 'hello \u001b[2Jworld');
    const result = await resources.run(['notify', url, 'foo', '--timeout', '60000']);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(
      'but not with a JSON-RPC response: hello \\u001b[2Jworld (not JSON)',
    );
    expect(result.code).toBe(3);
  },
);
