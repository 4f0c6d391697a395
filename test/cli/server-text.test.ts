/**
 * The CLI against a server whose text is meant for the terminal: an error message, its data, a
 * close reason, a refusal's body and headers, a tcp:// refusal line, holding ESC sequences
 * (window title, erase line, hidden text), BEL, CR, LF, TAB, DEL and C1 controls. What the CLI
 * prints on stderr holds no control character but the newline ending each of its own lines,
 * shows the escaped form instead, and is cut at 4096 characters of server text. In-process over
 * real sockets, printed by reportFailure as main() does.
 */
import { createServer as createNetServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { runCall } from '../../src/cli/commands.js';
import type { RpcConnection } from '../../src/cli/connection.js';
import { Deadline } from '../../src/cli/deadline.js';
import { endpointOf } from '../../src/cli/endpoint.js';
import { reportFailure } from '../../src/cli/errors.js';
import { HttpConnection } from '../../src/cli/http-connection.js';
import { TcpConnection } from '../../src/cli/tcp-connection.js';
import { WsConnection } from '../../src/cli/ws-connection.js';
import { FakeGateways, frameOf } from '../support/fake-gateway.js';

const gateways = new FakeGateways();
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await gateways.cleanup();
});

const options = { headers: {}, protocols: [], insecure: false, ca: undefined };
const MiB = 1024 * 1024;

/** What the reproducer sent: a window title, an erased line, a forged line, hidden text. */
const EVIL =
  '\u001b]0;PWNED-TITLE\u0007\u001b[2K\r\u001b[32mok\u001b[0m\nwsrpc: call succeeded (exit 0)\n\u001b[8m';
const EVIL_SHOWN =
  '\\u001b]0;PWNED-TITLE\\u0007\\u001b[2K\\r\\u001b[32mok\\u001b[0m\\nwsrpc: call succeeded (exit 0)\\n\\u001b[8m';
/** C1 (CSI, NEL), DEL and TAB besides. */
const MORE = '\u009b2J\u0085\u007f\tend';
const MORE_SHOWN = '\\u009b2J\\u0085\\u007f\\tend';
/** Fits a WebSocket close reason (123 bytes). */
const REASON = '\u001b[2K\r\u001b[31mX\u0007\nok\u009b8m';
const REASON_SHOWN = '\\u001b[2K\\r\\u001b[31mX\\u0007\\nok\\u009b8m';

/** Bidirectional controls (RLO reverses what follows, RLI ... PDI hides), LRM, RLM, ALM, U+2028/9. */
const BIDI =
  'x\u202etxt.exe\u2067hid\u2069\u202a\u202b\u202c\u202d\u2066\u2068\u200e\u200f\u061c\u2028\u2029';
const BIDI_SHOWN =
  'x\\u202etxt.exe\\u2067hid\\u2069\\u202a\\u202b\\u202c\\u202d\\u2066\\u2068\\u200e\\u200f\\u061c\\u2028\\u2029';
/** Control characters, bidirectional controls and the line and paragraph separators. */
const UNSAFE = /[\p{Cc}\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;

/** stderr's lines, each checked to hold no control character (the newline ending each is the CLI's). */
function safeLines(stderr: string): string[] {
  expect(stderr.endsWith('\n')).toBe(true);
  const lines = stderr.slice(0, -1).split('\n');
  for (const line of lines) expect(line).not.toMatch(UNSAFE);
  return lines;
}

/** What the CLI prints and exits with for a `call` of "foo" on `connection` (as main() does). */
async function call(connection: RpcConnection, deadline = new Deadline(10_000)) {
  let stdout = '';
  let stderr = '';
  const write = (text: string) => void (stdout += text);
  const code = await runCall(connection, 'foo', undefined, deadline, { write }).then(
    () => 0,
    (err: unknown) => reportFailure(err, { write: (text: string) => (stderr += text) }),
  );
  return { code, stdout, stderr };
}

/** A WebSocket server that hands each request to `onRequest`; the CLI's connection to it. */
async function wsCall(onRequest: (socket: WebSocket, id: unknown) => void) {
  const { url } = await gateways.listen((socket) =>
    socket.on('message', (data) => onRequest(socket, frameOf(data).id)),
  );
  const deadline = new Deadline(10_000);
  const connection = await WsConnection.open(endpointOf(new URL(url))!, options, deadline);
  cleanups.push(() => connection.close());
  return call(connection, deadline);
}

/** A TCP server that writes `bytes` to each connection and ends it; its port. */
async function rawServer(bytes: Buffer): Promise<number> {
  const sockets: Socket[] = [];
  const server: Server = createNetServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => undefined);
    socket.resume();
    socket.end(bytes);
  });
  cleanups.push(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise((resolve) => server.close(resolve));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** An HTTP answer: `head` in latin1 (one byte a character, as a server may send them), `body` in UTF-8. */
function httpAnswer(head: string, body: string): Buffer {
  const bodyBytes = Buffer.from(body, 'utf8');
  return Buffer.concat([
    Buffer.from(
      `${head}\r\nContent-Length: ${bodyBytes.length}\r\nConnection: close\r\n\r\n`,
      'latin1',
    ),
    bodyBytes,
  ]);
}

describe("the CLI prints a server's text without its control characters", () => {
  it('ws: an error message and its data are escaped, on one line each', async () => {
    const result = await wsCall((socket, id) =>
      socket.send(
        JSON.stringify({
          jsonrpc: '2.0',
          id,
          error: { code: -32000, message: EVIL + MORE, data: { note: `a${MORE}` } },
        }),
      ),
    );
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(safeLines(result.stderr)).toEqual([
      `error -32000: ${EVIL_SHOWN}${MORE_SHOWN}`,
      // JSON.stringify escapes C0 itself (\t as \\t); C1 and DEL it leaves to terminalText.
      `data: {"note":"a\\u009b2J\\u0085\\u007f\\tend"}`,
    ]);
  });

  it('ws: bidirectional controls in an error message and its data are escaped', async () => {
    const result = await wsCall((socket, id) =>
      socket.send(
        JSON.stringify({
          jsonrpc: '2.0',
          id,
          error: { code: -32000, message: BIDI, data: { [BIDI]: BIDI } },
        }),
      ),
    );
    expect(result.code).toBe(1);
    expect(safeLines(result.stderr)).toEqual([
      `error -32000: ${BIDI_SHOWN}`,
      `data: {"${BIDI_SHOWN}":"${BIDI_SHOWN}"}`,
    ]);
  });

  it('ws: a close reason is escaped', async () => {
    const result = await wsCall((socket) => socket.close(4000, REASON));
    expect(result.code).toBe(3);
    expect(safeLines(result.stderr)).toEqual([
      expect.stringMatching(/^wsrpc: 127\.0\.0\.1:\d+ closed the connection \(4000, (.*)\)$/),
    ]);
    expect(result.stderr).toContain(`(4000, ${REASON_SHOWN})`);
  });

  it('ws: a 1 MiB error message is cut to 4096 characters, and says how many were left out', async () => {
    const message = `${'M'.repeat(MiB - 1)}\u001b`;
    const result = await wsCall((socket, id) =>
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32000, message } })),
    );
    expect(result.code).toBe(1);
    expect(safeLines(result.stderr)).toEqual([
      `error -32000: ${'M'.repeat(4096)} ...[${MiB - 4096} more characters cut]`,
    ]);
  });

  it('ws upgrade refused: the body and the Retry-After header are escaped', async () => {
    const port = await rawServer(
      httpAnswer(
        'HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\u009b2J\u0085',
        `slow down${EVIL}${MORE}`,
      ),
    );
    const deadline = new Deadline(10_000);
    const refused = await WsConnection.open(
      endpointOf(new URL(`ws://127.0.0.1:${port}/rpc`))!,
      options,
      deadline,
    ).then(
      () => undefined,
      (err: unknown) => err,
    );
    let stderr = '';
    expect(reportFailure(refused, { write: (text: string) => (stderr += text) })).toBe(3);
    const [line] = safeLines(stderr);
    // White space in a body is one space; the other control characters are escaped.
    expect(line).toContain(
      '(the server said: "slow down\\u001b]0;PWNED-TITLE\\u0007\\u001b[2K \\u001b[32mok\\u001b[0m wsrpc: call succeeded (exit 0) \\u001b[8m\\u009b2J\\u0085\\u007f end")',
    );
    expect(line).toContain('retry in 5\\u009b2J\\u0085 s');
  });

  it('http: a redirect Location and a body that is not JSON-RPC are escaped', async () => {
    const redirect = await rawServer(
      httpAnswer('HTTP/1.1 302 Found\r\nLocation: /elsewhere\u009b8m\u0085', ''),
    );
    const moved = await call(
      new HttpConnection(endpointOf(new URL(`http://127.0.0.1:${redirect}/rpc`))!, options),
    );
    expect(moved.code).toBe(3);
    expect(safeLines(moved.stderr)[0]).toContain('redirects /rpc to /elsewhere\\u009b8m\\u0085');

    const garbage = await rawServer(httpAnswer('HTTP/1.1 200 OK', `${EVIL}${MORE}`));
    const answered = await call(
      new HttpConnection(endpointOf(new URL(`http://127.0.0.1:${garbage}/rpc`))!, options),
    );
    expect(answered.code).toBe(3);
    expect(safeLines(answered.stderr)[0]).toContain(
      'not with a JSON-RPC response: \\u001b]0;PWNED-TITLE\\u0007',
    );
  });

  it('tcp://: a refusal line is escaped, and cut past 4096 characters', async () => {
    const refusal = (message: string) =>
      Buffer.from(
        `${JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message, data: { status: 403 } } })}\n`,
      );
    const open = async (port: number) => {
      const deadline = new Deadline(10_000);
      const endpoint = endpointOf(new URL(`tcp://127.0.0.1:${port}`))!;
      const connection = await TcpConnection.open(endpoint, options, deadline);
      cleanups.push(() => connection.close());
      return call(connection, deadline);
    };

    const evil = await open(await rawServer(refusal(EVIL + MORE)));
    expect(evil.code).toBe(3);
    expect(safeLines(evil.stderr)[0]).toContain(
      `refused the connection: "${EVIL_SHOWN}${MORE_SHOWN}"`,
    );

    const long = await open(await rawServer(refusal('L'.repeat(60_000))));
    expect(long.code).toBe(3);
    expect(safeLines(long.stderr)[0]).toContain(
      `refused the connection: "${'L'.repeat(4096)} ...[${60_000 - 4096} more characters cut]"`,
    );
  });
});
