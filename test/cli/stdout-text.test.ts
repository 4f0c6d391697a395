/**
 * The CLI against a server whose JSON answers hold characters a terminal acts on but
 * JSON.stringify leaves raw: DEL, the C1 controls (U+009B is CSI), the bidirectional controls
 * (Trojan Source: an override that reverses what follows, an isolate that hides it) and the line
 * and paragraph separators, in string values and in object keys. Every JSON text the CLI prints on
 * stdout (a call's result, rpc.discover's document, each subscription message, over WebSocket and
 * HTTP) holds none of them raw, only the newlines of its own layout, and parses back to exactly
 * what the server sent. In-process over real sockets, as main() runs each command.
 */
import { createServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { runCall, runDiscover } from '../../src/cli/commands.js';
import type { RpcConnection } from '../../src/cli/connection.js';
import { Deadline } from '../../src/cli/deadline.js';
import { endpointOf } from '../../src/cli/endpoint.js';
import { reportFailure } from '../../src/cli/errors.js';
import { HttpConnection } from '../../src/cli/http-connection.js';
import { runSubscribe } from '../../src/cli/subscribe.js';
import { WsConnection } from '../../src/cli/ws-connection.js';
import { DEFAULT_SUBSCRIPTION_METHODS } from '../../src/protocol/subscription-frames.js';
import { FakeGateways, frameOf } from '../support/fake-gateway.js';
import { listenOnLoopback } from '../support/network.js';

const gateways = new FakeGateways();
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await gateways.cleanup();
});

const options = { headers: {}, protocols: [], insecure: false, ca: undefined };

/** RLO then text that shows reversed; an isolate (RLI ... PDI) around a hidden part. */
const BIDI =
  'invoice\u202etxt.exe \u2067hidden\u2069 \u202a\u202b\u202c\u202d\u2066\u2068\u200e\u200f\u061c';
/** CSI "2J" (clear the screen) in its C1 form, NEL, DEL; the line and paragraph separators. */
const C1 = '\u009b2J\u0085\u007f \u2028\u2029';
/** C0 that JSON.stringify escapes itself. */
const C0 = '\u001b]0;PWNED\u0007\r\n\t';
const HOSTILE = {
  text: BIDI + C1 + C0,
  [`key${BIDI}${C1}`]: [C1, { [BIDI]: BIDI }, 1.5, true, null],
  plain: 'مرحبا שלום 語 😀',
};

/** Raw characters a terminal acts on; C0 but the newline, which the CLI writes between lines. */
const UNSAFE = /(?!\n)[\p{Cc}\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;

/** What the CLI printed on stdout, checked to hold no character of UNSAFE raw. */
function safe(stdout: string): string {
  expect(stdout.endsWith('\n')).toBe(true);
  expect(stdout).not.toMatch(UNSAFE);
  return stdout;
}

/** A WebSocket server that answers every request with `result`; the CLI's connection to it. */
async function wsConnection(result: unknown) {
  const { url } = await gateways.listen((socket: WebSocket) =>
    socket.on('message', (data) => {
      const { id, method } = frameOf(data);
      socket.send(
        JSON.stringify({ jsonrpc: '2.0', id, result: method === 'subscribe' ? 's1' : result }),
      );
      if (method !== 'subscribe') return;
      for (const message of [result, C1, { [C1]: 1 }]) {
        socket.send(
          JSON.stringify({
            jsonrpc: '2.0',
            method: 'subscription',
            params: { subscription: 's1', result: message },
          }),
        );
      }
      socket.send(
        JSON.stringify({
          jsonrpc: '2.0',
          method: 'subscription',
          params: { subscription: 's1', complete: true },
        }),
      );
    }),
  );
  const deadline = new Deadline(10_000);
  const connection = await WsConnection.open(endpointOf(new URL(url))!, options, deadline);
  cleanups.push(() => connection.close());
  return { connection, deadline };
}

/** An HTTP server that answers every JSON-RPC POST with `result`; the CLI's connection to it. */
async function httpConnection(result: unknown): Promise<RpcConnection> {
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      const { id } = JSON.parse(body) as { id: unknown };
      response.setHeader('content-type', 'application/json');
      response.end(JSON.stringify({ jsonrpc: '2.0', id, result }));
    });
  });
  const { port, close } = await listenOnLoopback(server);
  cleanups.push(close);
  const connection = new HttpConnection(
    endpointOf(new URL(`http://127.0.0.1:${port}/rpc`))!,
    options,
  );
  cleanups.push(() => connection.close());
  return connection;
}

/** stdout and the exit code of `run`, failures printed by reportFailure as main() does. */
async function output(run: (stdout: { write(text: string): void }) => Promise<void>) {
  let stdout = '';
  let stderr = '';
  const code = await run({ write: (text) => void (stdout += text) }).then(
    () => 0,
    (err: unknown) => reportFailure(err, { write: (text: string) => (stderr += text) }),
  );
  return { code, stdout, stderr };
}

describe('the CLI prints JSON from a server on stdout without raw control characters', () => {
  it('ws call: the result is escaped and parses back to what the server sent', async () => {
    const { connection, deadline } = await wsConnection(HOSTILE);
    const result = await output((stdout) =>
      runCall(connection, 'foo', undefined, deadline, stdout),
    );
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(safe(result.stdout))).toEqual(HOSTILE);
    expect(result.stdout).toContain('"text": "invoice\\u202etxt.exe \\u2067hidden\\u2069');
    expect(result.stdout).toContain('"keyinvoice\\u202etxt.exe');
    expect(result.stdout).toContain('\\u009b2J\\u0085\\u007f \\u2028\\u2029');
    // Printable text, right-to-left letters included, is written as it is.
    expect(result.stdout).toContain('"plain": "مرحبا שלום 語 😀"');
  });

  it('ws discover: the OpenRPC document is escaped and parses back', async () => {
    const document = { openrpc: '1.2.6', info: { title: BIDI, version: C1 }, methods: [] };
    const { connection, deadline } = await wsConnection(document);
    const result = await output((stdout) => runDiscover(connection, deadline, stdout));
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(safe(result.stdout))).toEqual(document);
  });

  it('ws subscribe: each message is one escaped line that parses back', async () => {
    const { connection, deadline } = await wsConnection(HOSTILE);
    const result = await output((stdout) =>
      runSubscribe(connection, {
        topic: 'ticks',
        params: undefined,
        methods: { ...DEFAULT_SUBSCRIPTION_METHODS },
        deadline,
        stop: new AbortController().signal,
        stdout,
        stderr: { write: () => undefined },
      }),
    );
    expect(result).toMatchObject({ code: 0, stderr: '' });
    const lines = safe(result.stdout).slice(0, -1).split('\n');
    expect(lines.map((line) => JSON.parse(line) as unknown)).toEqual([HOSTILE, C1, { [C1]: 1 }]);
    expect(lines[1]).toBe('"\\u009b2J\\u0085\\u007f \\u2028\\u2029"');
    expect(lines[2]).toBe('{"\\u009b2J\\u0085\\u007f \\u2028\\u2029":1}');
  });

  it('http call: the result is escaped and parses back', async () => {
    const connection = await httpConnection(HOSTILE);
    const result = await output((stdout) =>
      runCall(connection, 'foo', undefined, new Deadline(10_000), stdout),
    );
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(safe(result.stdout))).toEqual(HOSTILE);
  });
});
