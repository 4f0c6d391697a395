/**
 * The user's PARAMS go to the server as typed, number for number, over ws://, tcp:// and
 * http://: a number a double cannot hold (12345678901234567891, 1e400, 1e-400), a negative zero
 * and the spellings JSON.stringify would change (1.0, 1e2) are sent as their text, not as the
 * double JSON.parse reads (12345678901234567000, null, 0, 0, 1, 100). Against servers that keep
 * the request's text, over real sockets, through the built CLI.
 */
import { expect, it } from 'vitest';
import { answeringHttp, answeringTcp, answeringWs, cliWithServers, idOf } from './raw-servers.js';
import type { Answer, Cleanups } from './raw-servers.js';

const { resources, cleanups } = cliWithServers();

const TYPED = '[12345678901234567891, -0, 1e400, 0.1, 1.0, 1e2, {"tiny": -1.5e-400, "n": 7}]';
const SENT = '[12345678901234567891,-0,1e400,0.1,1.0,1e2,{"tiny":-1.5e-400,"n":7}]';

const servers: Record<string, (cleanups: Cleanups, answer: Answer) => Promise<string>> = {
  ws: answeringWs,
  tcp: answeringTcp,
  http: answeringHttp,
};

it.each(Object.keys(servers))('call over %s sends PARAMS as typed', async (scheme) => {
  const received: string[] = [];
  const url = await servers[scheme]!(cleanups, (text) => {
    received.push(text);
    return `{"jsonrpc":"2.0","id":${idOf(text)},"result":true}`;
  });
  const result = await resources.run(['call', url, 'echo', TYPED]);
  expect(result).toMatchObject({ code: 0, stderr: '' });
  expect(received).toHaveLength(1);
  expect(received[0]).toContain(`"params":${SENT}`);
});

it('notify over http and subscribe over ws send PARAMS as typed', async () => {
  const posted: string[] = [];
  const httpUrl = await answeringHttp(cleanups, (text) => {
    posted.push(text);
    return undefined;
  });
  const notified = await resources.run(['notify', httpUrl, 'record', TYPED]);
  expect(notified).toMatchObject({ code: 0, stderr: '' });
  expect(posted[0]).toContain(`"params":${SENT}`);

  const received: string[] = [];
  const wsUrl = await answeringWs(cleanups, (text) => {
    received.push(text);
    // The subscription id (and the unsubscribe's answer): the stream runs until SIGINT.
    return `{"jsonrpc":"2.0","id":${idOf(text)},"result":"sub1"}`;
  });
  const started = resources.start(['subscribe', wsUrl, 'ticker', '{"from": 1e400}']);
  // A child process starting and connecting: seconds on a loaded machine, not poll's default 1 s.
  await expect.poll(() => received.length, { timeout: 20_000 }).toBe(1);
  expect(received[0]).toContain('"params":["ticker",{"from":1e400}]');
  started.child.kill('SIGINT');
  const ended = await started.exited;
  expect(ended.code).toBe(0);
});
