/**
 * The CLI against a server that means it harm: whatever it sends, `call` and `subscribe` end
 * with a ConnectionError (exit 3) that says what the server did, never a stack trace, and the
 * CLI holds a bounded amount of it: messages nested past 64 levels, WebSocket messages and
 * tcp:// lines past 64 MiB, more than 16 MiB of notifications before the subscribe answer.
 * In-process, over real sockets, against src.
 */
import { createServer as createHttpServer } from 'node:http';
import type { ServerResponse } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { runCall } from '../../src/cli/commands.js';
import type { RpcConnection } from '../../src/cli/connection.js';
import { Deadline } from '../../src/cli/deadline.js';
import { endpointOf } from '../../src/cli/endpoint.js';
import { reportFailure } from '../../src/cli/errors.js';
import { HttpConnection } from '../../src/cli/http-connection.js';
import type { PeerConnection } from '../../src/cli/peer-connection.js';
import { runSubscribe } from '../../src/cli/subscribe.js';
import { TcpConnection } from '../../src/cli/tcp-connection.js';
import { WsConnection } from '../../src/cli/ws-connection.js';
import { DEFAULT_SUBSCRIPTION_METHODS } from '../../src/protocol/subscription-frames.js';
import { listenOnLoopback } from '../support/network.js';
import { rawWsServer } from '../support/raw-ws-server.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const MiB = 1024 * 1024;
const options = { headers: {}, protocols: [], insecure: false, ca: undefined };

/** `[[...]]` nested `depth` deep. */
const nested = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);

/** A `ws` server that hands each message it gets (parsed) to `onMessage`, with the socket. */
function wsServer(onMessage: (socket: WebSocket, message: { id?: unknown }) => void) {
  return rawWsServer(
    cleanups,
    (socket, text) => onMessage(socket, JSON.parse(text) as { id?: unknown }),
    { maxPayload: 0 },
  );
}

async function openWs(url: string, deadline: Deadline): Promise<WsConnection> {
  const connection = await WsConnection.open(endpointOf(new URL(url))!, options, deadline);
  cleanups.push(() => connection.close());
  return connection;
}

/** What the CLI prints and exits with for `run`'s outcome (as main() does). */
async function outcome(run: (stdout: { write(text: string): void }) => Promise<void>) {
  let stdout = '';
  let stderr = '';
  const code = await run({ write: (text) => void (stdout += text) }).then(
    () => 0,
    (err: unknown) => reportFailure(err, { write: (text: string) => (stderr += text) }),
  );
  return { code, stdout, stderr };
}

function call(connection: RpcConnection, deadline: Deadline) {
  return outcome((stdout) => runCall(connection, 'foo', undefined, deadline, stdout));
}

function subscribe(connection: PeerConnection, deadline: Deadline) {
  const stop = new AbortController();
  cleanups.push(() => stop.abort());
  let stderr = '';
  return outcome((stdout) =>
    runSubscribe(connection, {
      topic: 'ticker',
      params: undefined,
      methods: { ...DEFAULT_SUBSCRIPTION_METHODS },
      deadline,
      stop: stop.signal,
      stdout,
      stderr: { write: (text: string) => (stderr += text) },
    }),
  );
}

describe('the CLI against a hostile server', () => {
  it('call: a result nested past 64 levels ends with exit 3 naming the limit; 64 is printed', async () => {
    // The message is {"jsonrpc":..,"id":..,"result":R}: R nested 63 deep makes 64 levels in all.
    let depth = 63;
    const url = await wsServer((socket, { id }) =>
      socket.send(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${nested(depth)}}`),
    );
    const deadline = new Deadline(10_000);
    const fine = await call(await openWs(url, deadline), deadline);
    expect(fine).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(fine.stdout)).toEqual(JSON.parse(nested(63)));

    depth = 20_000;
    const deep = await call(await openWs(url, deadline), deadline);
    expect(deep.code).toBe(3);
    expect(deep.stderr).toMatch(
      /^wsrpc: 127\.0\.0\.1:\d+ sent a message nested deeper than 64 levels/,
    );
  });

  it('subscribe: a notification nested past 64 levels ends with exit 3, no uncaught exception', async () => {
    const url = await wsServer((socket, { id }) => {
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, result: 'sub1' }));
      socket.send(
        `{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"sub1","result":1}}`,
      );
      socket.send(
        `{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"sub1","result":${nested(20_000)}}}`,
      );
    });
    const deadline = new Deadline(10_000);
    const result = await subscribe(await openWs(url, deadline), deadline);
    expect(result.stdout).toBe('1\n');
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/sent a message nested deeper than 64 levels/);
  });

  it('http: a body nested past 64 levels ends with exit 3 naming the limit', async () => {
    const server = createHttpServer((request, response) => {
      request.resume();
      request.on('end', () => response.end(`{"jsonrpc":"2.0","id":1,"result":${nested(20_000)}}`));
    });
    const listening = await listenOnLoopback(server);
    cleanups.push(listening.close);
    const url = `http://127.0.0.1:${listening.port}/rpc`;
    const connection = new HttpConnection(endpointOf(new URL(url))!, options);
    const result = await call(connection, new Deadline(10_000));
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/sent a message nested deeper than 64 levels/);
  });

  it('ws: a message past 64 MiB ends with exit 3 naming the limit', async () => {
    const big = JSON.stringify('x'.repeat(64 * MiB));
    const url = await wsServer((socket, { id }) =>
      socket.send(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${big}}`),
    );
    const deadline = new Deadline(15_000);
    const result = await call(await openWs(url, deadline), deadline);
    expect(result.code).toBe(3);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/sent a message larger than 64 MiB/);
  });

  it('tcp://: a line that never ends is dropped past 64 MiB, exit 3 naming the limit', async () => {
    const sockets: Socket[] = [];
    const server = createNetServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => undefined);
      socket.resume();
      socket.write('{"jsonrpc":"2.0","method":"subscription","params":["');
      const chunk = 'x'.repeat(MiB);
      let sent = 0;
      const pump = (): void => {
        while (sent < 65 && !socket.destroyed) {
          sent++;
          if (!socket.write(chunk)) return void socket.once('drain', pump);
        }
      };
      pump();
    });
    cleanups.push(() => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(resolve));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `tcp://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const deadline = new Deadline(15_000);
    const connection = await TcpConnection.open(endpointOf(new URL(url))!, options, deadline);
    cleanups.push(() => connection.close());
    const result = await call(connection, deadline);
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/sent a line longer than 64 MiB/);
  });

  it('subscribe: more than 16 MiB of notifications before the answer ends with exit 3', async () => {
    const big = 'y'.repeat(MiB);
    const url = await wsServer((socket) => {
      // Never answers the subscribe; sends notifications, each for some other subscription.
      for (let n = 0; n < 17; n++) {
        socket.send(
          `{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"s${n}","result":"${big}"}}`,
        );
      }
    });
    const deadline = new Deadline(15_000);
    const result = await subscribe(await openWs(url, deadline), deadline);
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/more than 16 MiB of notifications before answering "subscribe"/);
  });

  /**
   * A server that sends `texts` as the results of notifications for other subscriptions, then
   * one for the subscription it answers with ("mine"), then the answer, then completes it.
   */
  async function earlyServer(texts: string[]) {
    return wsServer((socket, { id }) => {
      if (id === undefined) return;
      texts.forEach((text, n) =>
        socket.send(
          `{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"s${n}","result":"${text}"}}`,
        ),
      );
      const mine = (params: string): string =>
        `{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"mine",${params}}}`;
      socket.send(mine('"result":1'));
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, result: 'mine' }));
      socket.send(mine('"complete":true'));
    });
  }

  it('subscribe: the 16 MiB before the answer are UTF-8 bytes: 6 Mi characters of 3 bytes each pass it', async () => {
    // 6 Mi characters (under 16 Mi), 18 MiB of UTF-8 (over 16 MiB).
    const url = await earlyServer(Array.from({ length: 6 }, () => '語'.repeat(MiB)));
    const deadline = new Deadline(15_000);
    const result = await subscribe(await openWs(url, deadline), deadline);
    expect(result.code).toBe(3);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/more than 16 MiB of notifications before answering "subscribe"/);
  });

  it('subscribe: multi-byte text under 16 MiB of UTF-8 before the answer is kept (3 times its length is over)', async () => {
    // 5 MiB of ASCII, then 1.5 MiB of 3-byte and 2 MiB of 4-byte characters: 6.5 Mi UTF-16
    // code units (3 times that is over 16 MiB), 8.5 MiB of UTF-8.
    const texts = [
      ...Array.from({ length: 5 }, () => 'x'.repeat(MiB)),
      '語'.repeat(MiB / 2),
      '😀'.repeat(MiB / 2),
    ];
    const bytes = texts.reduce((sum, text) => sum + Buffer.byteLength(text), 0);
    expect(bytes).toBeLessThan(16 * MiB);
    expect(texts.join('').length * 3).toBeGreaterThan(16 * MiB);
    const url = await earlyServer(texts);
    const deadline = new Deadline(15_000);
    const result = await subscribe(await openWs(url, deadline), deadline);
    expect(result).toEqual({ code: 0, stdout: '1\n', stderr: '' });
  });

  /**
   * An HTTP server that answers every request (a POST, or a WebSocket upgrade) with `status` and
   * a body that never ends: `send` writes its pieces. Its address, and the bytes it wrote.
   */
  async function endlessBody(
    status: number,
    send: (response: ServerResponse) => void,
  ): Promise<string> {
    const responses = new Set<ServerResponse>();
    const server = createHttpServer((request, response) => {
      request.resume();
      responses.add(response);
      response.on('close', () => responses.delete(response));
      response.writeHead(status, { 'content-type': 'text/plain' });
      send(response);
    });
    const { port, close } = await listenOnLoopback(server);
    cleanups.push(() => {
      for (const response of responses) response.destroy();
      return close();
    });
    return `127.0.0.1:${port}`;
  }

  /** Write `chunk` as fast as the client reads it, until the response closes. */
  const flood =
    (chunk: Buffer | string) =>
    (response: ServerResponse): void => {
      const pump = (): void => {
        while (!response.destroyed && response.write(chunk));
      };
      response.on('drain', pump);
      pump();
    };

  /** Write one byte every 50 ms, until the response closes. */
  const drip = (response: ServerResponse): void => {
    response.write('go away');
    const timer = setInterval(() => response.write('.'), 50);
    response.on('close', () => clearInterval(timer));
  };

  const rejected =
    /^wsrpc: authentication rejected: 127\.0\.0\.1:\d+ answered .* with 401 Unauthorized \(the server said: "go away/;

  it('http: a 401 whose body never ends is an authentication rejection, at once', async () => {
    const host = await endlessBody(401, flood(`go away ${'x'.repeat(64 * 1024)}`));
    const connection = new HttpConnection(endpointOf(new URL(`http://${host}/rpc`))!, options);
    const result = await call(connection, new Deadline(15_000));
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(rejected);
  });

  it('ws: a 401 to the upgrade whose body never ends is an authentication rejection, with no timeout', async () => {
    const host = await endlessBody(401, flood(`go away ${'x'.repeat(64 * 1024)}`));
    const result = await outcome(() => openWs(`ws://${host}/rpc`, new Deadline(0)).then(() => {}));
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(rejected);
  });

  it('http and ws: a 401 whose short body trickles and never ends is a rejection, with no timeout', async () => {
    const host = await endlessBody(401, drip);
    const connection = new HttpConnection(endpointOf(new URL(`http://${host}/rpc`))!, options);
    const overHttp = await call(connection, new Deadline(0));
    expect(overHttp.code).toBe(3);
    expect(overHttp.stderr).toMatch(rejected);
    const overWs = await outcome(() => openWs(`ws://${host}/rpc`, new Deadline(0)).then(() => {}));
    expect(overWs.code).toBe(3);
    expect(overWs.stderr).toMatch(rejected);
  });

  it('http: a notification answered 200 with a body that never ends is taken at its status, exit 0', async () => {
    const host = await endlessBody(200, flood(Buffer.alloc(MiB, 'x')));
    const connection = new HttpConnection(endpointOf(new URL(`http://${host}/rpc`))!, options);
    const result = await outcome(() => connection.notify('foo', undefined, new Deadline(0)));
    expect(result).toEqual({ code: 0, stdout: '', stderr: '' });
  });

  it('http: a 200 whose body passes 64 MiB ends with exit 3 naming the limit, the rest not read', async () => {
    const host = await endlessBody(200, flood(Buffer.alloc(MiB, 'x')));
    const connection = new HttpConnection(endpointOf(new URL(`http://${host}/rpc`))!, options);
    const result = await call(connection, new Deadline(15_000));
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(
      /^wsrpc: 127\.0\.0\.1:\d+ sent a body larger than 64 MiB \(the CLI's limit\)/,
    );
  });

  /** A tcp:// server answering each line with the bytes `answer(id)` gives, in `pieces` writes. */
  async function tcpAnswering(answer: (id: unknown) => Buffer, pieces = 1): Promise<string> {
    const sockets: Socket[] = [];
    const server = createNetServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => undefined);
      let text = '';
      socket.setEncoding('utf8').on('data', (chunk: string) => {
        text += chunk;
        const newline = text.indexOf('\n');
        if (newline < 0) return;
        const { id } = JSON.parse(text.slice(0, newline)) as { id?: unknown };
        text = text.slice(newline + 1);
        const bytes = answer(id);
        const step = Math.ceil(bytes.length / pieces);
        // Each piece on its own turn, so each arrives as a chunk of its own.
        for (let at = 0; at < bytes.length; at += step) {
          setTimeout(() => socket.write(bytes.subarray(at, at + step)), (at / step) * 20);
        }
      });
    });
    cleanups.push(() => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(resolve));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `tcp://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  /** A response to `id` whose result is a string holding `bytes` as they are. */
  const resultHolding = (id: unknown, bytes: number[], end = '\n'): Buffer =>
    Buffer.concat([
      Buffer.from(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":"`),
      Buffer.from(bytes),
      Buffer.from(`"}${end}`),
    ]);

  const notUtf8 = /^wsrpc: 127\.0\.0\.1:\d+ sent a message that is not UTF-8/;

  it('tcp://: a line that is not UTF-8 ends with exit 3 saying so, nothing printed', async () => {
    const url = await tcpAnswering((id) => resultHolding(id, [0xff, 0x9b, 0x32, 0x4a]));
    const deadline = new Deadline(10_000);
    const connection = await TcpConnection.open(endpointOf(new URL(url))!, options, deadline);
    cleanups.push(() => connection.close());
    const result = await call(connection, deadline);
    expect(result).toMatchObject({ code: 3, stdout: '' });
    expect(result.stderr).toMatch(notUtf8);
  });

  it('tcp://: UTF-8 split between chunks is read whole', async () => {
    // "é€😀", each character cut between two writes.
    const bytes = [0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80];
    const url = await tcpAnswering((id) => resultHolding(id, bytes), 11);
    const deadline = new Deadline(10_000);
    const connection = await TcpConnection.open(endpointOf(new URL(url))!, options, deadline);
    cleanups.push(() => connection.close());
    const result = await call(connection, deadline);
    expect(result).toEqual({ code: 0, stdout: '"é€😀"\n', stderr: '' });
  });

  it('ws: a text message that is not UTF-8 ends with exit 3 saying so (the CLI closed with 1007)', async () => {
    const url = await wsServer((socket, { id }) =>
      socket.send(resultHolding(id, [0xff, 0x9b, 0x32, 0x4a], ''), { binary: false }),
    );
    const deadline = new Deadline(10_000);
    const result = await call(await openWs(url, deadline), deadline);
    expect(result).toMatchObject({ code: 3, stdout: '' });
    expect(result.stderr).toMatch(notUtf8);
  });

  it('ws: a frame breaking the protocol ends with exit 3 saying so, not as a close without a frame', async () => {
    const url = await wsServer((socket) =>
      // A final frame of opcode 3, which RFC 6455 reserves.
      (socket as unknown as { _socket: Socket })._socket.write(Buffer.from([0x83, 0x00])),
    );
    const deadline = new Deadline(10_000);
    const result = await call(await openWs(url, deadline), deadline);
    expect(result).toMatchObject({ code: 3, stdout: '' });
    expect(result.stderr).toMatch(
      /^wsrpc: 127\.0\.0\.1:\d+ broke the WebSocket protocol \(Invalid WebSocket frame: invalid opcode 3\)/,
    );
  });

  it('http: a body that is not UTF-8 ends with exit 3 saying so, nothing printed', async () => {
    const server = createHttpServer((request, response) => {
      request.resume();
      request.on('end', () => response.end(resultHolding(1, [0xff, 0xc3, 0x28, 0x9b], '')));
    });
    const listening = await listenOnLoopback(server);
    cleanups.push(listening.close);
    const url = `http://127.0.0.1:${listening.port}/rpc`;
    const connection = new HttpConnection(endpointOf(new URL(url))!, options);
    const result = await call(connection, new Deadline(10_000));
    expect(result).toMatchObject({ code: 3, stdout: '' });
    expect(result.stderr).toMatch(notUtf8);
  });

  it('call: a result that cannot be printed ends with exit 3, no stack trace', async () => {
    const unprintable: RpcConnection = {
      call: () => Promise.resolve({ n: 1n }),
      notify: () => Promise.resolve(),
      close: () => Promise.resolve(),
    };
    const result = await call(unprintable, new Deadline(1_000));
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/^wsrpc: cannot print the answer to "foo": /);
  });
});
