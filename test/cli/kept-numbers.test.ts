/**
 * The built CLI against servers that write numbers a double cannot hold (1e400, an integer of
 * 20 digits, 1e-400): printed as the server wrote them, never as null or a rounded neighbour,
 * over http://, ws:// and tcp://, in a result, a subscription's messages and an error's data;
 * and keepNumbers, which carries their text through JSON.parse, on its own.
 */
import { createServer as createHttpServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import type { AddressInfo, Server } from 'node:net';
import { createInterface } from 'node:readline';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { jsonText } from '../../src/cli/json-text.js';
import { keepNumbers, writeKeptNumbers } from '../../src/cli/kept-numbers.js';
import { rawWsServer } from '../support/raw-ws-server.js';
import { CliResources, ensureCliBuilt, waitFor } from './cli-harness.js';

const resources = new CliResources();
const closers: (() => Promise<unknown>)[] = [];

beforeAll(ensureCliBuilt, 180_000);
afterEach(async () => {
  await resources.cleanup();
  await Promise.all(closers.splice(0).map((close) => close()));
});

/** A reply to the request `text`, its id echoed as sent, `rest` its other members (JSON text). */
function reply(text: string, rest: string): string {
  const { id } = JSON.parse(text) as { id: unknown };
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id)},${rest}}`;
}

function listening(server: Server | ReturnType<typeof createHttpServer>): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
}

/** An http:// server answering each POST with `rest`; its URL. */
async function httpServer(rest: string): Promise<string> {
  const server = createHttpServer((request, response) => {
    let body = '';
    request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      response.setHeader('content-type', 'application/json');
      response.end(reply(body, rest));
    });
  });
  closers.push(() => new Promise((resolve) => server.close(resolve)));
  return `http://127.0.0.1:${await listening(server)}/rpc`;
}

/** A tcp:// server of newline-delimited JSON answering each line with `rest`; its URL. */
async function tcpServer(rest: string): Promise<string> {
  const server = createNetServer((socket) => {
    socket.on('error', () => undefined);
    createInterface({ input: socket }).on('line', (line) => socket.write(`${reply(line, rest)}\n`));
  });
  closers.push(() => new Promise((resolve) => server.close(resolve)));
  return `tcp://127.0.0.1:${await listening(server)}`;
}

/** A ws:// server handing each message's text to `onMessage` with a way to send; its URL. */
async function wsServer(onMessage: (text: string, send: (text: string) => void) => void) {
  const url = await rawWsServer(closers, (socket, text) =>
    onMessage(text, (reply) => socket.send(reply)),
  );
  return `${url}/rpc`;
}

const RESULT =
  '{"big":1e400,"negative":-1E+400,"long":12345678901234567891,"tiny":1e-400,' +
  '"fraction":0.30000000000000000001,"plain":[1.5,1.0,100E-2,1e2],"text":"1e400"}';
// The numbers a double holds are written as JavaScript writes them (1.0 is 1, 1e2 is 100).
const PRINTED = [
  '{',
  '  "big": 1e400,',
  '  "negative": -1E+400,',
  '  "long": 12345678901234567891,',
  '  "tiny": 1e-400,',
  '  "fraction": 0.30000000000000000001,',
  '  "plain": [',
  '    1.5,',
  '    1,',
  '    1,',
  '    100',
  '  ],',
  '  "text": "1e400"',
  '}',
  '',
].join('\n');

describe('wsrpc: numbers a double cannot hold are printed as the server wrote them', () => {
  it('call over http://, ws:// and tcp://', async () => {
    const urls = [
      await httpServer(`"result":${RESULT}`),
      await wsServer((text, send) => send(reply(text, `"result":${RESULT}`))),
      await tcpServer(`"result":${RESULT}`),
    ];
    for (const url of urls) {
      const result = await resources.run(['call', url, 'numbers']);
      expect({ url, ...result }).toEqual({
        url,
        code: 0,
        signal: null,
        stdout: PRINTED,
        stderr: '',
      });
    }
  });

  it("an error's data, on stderr", async () => {
    const url = await tcpServer('"error":{"code":-32000,"message":"too big","data":[1e400,7]}');
    const result = await resources.run(['call', url, 'numbers']);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('error -32000: too big\ndata: [1e400,7]\n');
  });

  it("subscribe: each message, and the server's id as it wrote it, unsubscribing with it too", async () => {
    // Two ids a double cannot tell apart: the messages of the other subscription are not ours.
    const ours = '12345678901234567891';
    const other = '12345678901234567890';
    const notification = (id: string, result: string): string =>
      `{"jsonrpc":"2.0","method":"subscription","params":{"subscription":${id},"result":${result}}}`;
    const received: string[] = [];
    const url = await wsServer((text, send) => {
      received.push(text);
      send(reply(text, `"result":${received.length === 1 ? ours : 'true'}`));
      if (received.length > 1) return;
      send(notification(other, '"not ours"'));
      send(notification(ours, '{"price":1e400}'));
      send(notification(ours, '-2e-400'));
    });
    const cli = resources.start(['subscribe', url, 'ticker']);
    await waitFor(() => cli.lines().length >= 2, 'two lines on stdout');
    cli.child.kill('SIGINT');
    const result = await cli.exited;
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(cli.lines()).toEqual(['{"price":1e400}', '-2e-400']);
    expect(received).toHaveLength(2);
    expect(received[1]).toContain(`"params":[${ours}]`);
  });
});

describe('keepNumbers and writeKeptNumbers', () => {
  /** `text` parsed as the CLI parses it, and written back compact. */
  const again = (text: string): string =>
    writeKeptNumbers(JSON.stringify(JSON.parse(keepNumbers(text))));

  it('a number a double cannot hold is written back as its text, wherever it is', () => {
    for (const text of [
      '1e400',
      '[1e400,-1E+400,1e-400,4.9e-325,2e308,1.7976931348623159e308]',
      '[9007199254740993,12345678901234567891,0.1000000000000000055511151231257827]',
      '[1.23456e-320,1.7976931348623158e308,1e0400,-0.0000000000000000000000000001e-400]',
      '{"a":{"b":[1e400]},"c":1e400}',
    ]) {
      expect(again(text)).toBe(text);
    }
    expect(jsonText(JSON.parse(keepNumbers('{"n":[1e400]}')), 2)).toBe(
      '{\n  "n": [\n    1e400\n  ]\n}',
    );
  });

  it('a number a double holds, and every text without such a number, is left as it is', () => {
    const held =
      '[1.0,1e2,100E-2,0.1,9007199254740991,1234567890123456,-0,1e308,5e-324,1.5e-323,' +
      '1.7976931348623157e308,0.0000000000000001,1e-300,123456789012345e-300]';
    expect(keepNumbers(held)).toBe(held);
    const words = '{"id":"12345678901234567891","e":"x e400 1e400","k\\"":"\\"1e400"}';
    expect(keepNumbers(words)).toBe(words);
  });

  it('text that is not JSON stays text JSON.parse refuses', () => {
    for (const text of [
      '{1e400:1}',
      '{1e400 \n :1}',
      '[01e400]',
      '[1e400.5]',
      '[1e400',
      '[1e400x]',
    ]) {
      expect((): unknown => JSON.parse(text)).toThrow(SyntaxError);
      expect((): unknown => JSON.parse(keepNumbers(text))).toThrow(SyntaxError);
    }
  });

  it("a server's string that looks like a kept number stays a string", () => {
    const text = JSON.stringify(['\u0000000000000000' + '1e400', '\u00001e400']);
    expect(again(text)).toBe(text);
  });
});
