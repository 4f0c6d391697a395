/**
 * POST /rpc reads its body as UTF-8 JSON, as sent: a body it would misread is refused before it
 * is read, with Connection: close and a text saying what to send. A content coding other than
 * identity (gzip, br) or a charset other than UTF-8 is 415; a transfer coding other than chunked
 * (Node's parser lets `gzip, chunked` through, undoing only the chunking) is 501. No handler
 * runs for any of them. `charset=utf-8`, in any case or quoted, and `identity` are served.
 *
 * Also here: OPTIONS /rpc without an Origin is no CORS preflight, and is answered 204 with the
 * methods the route takes.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';

const res = new Resources();
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await res.cleanup();
});

interface RawAnswer {
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  body: string;
}

/**
 * Send `head` and `body` as one request on a socket of its own (`Connection: close` asked, so
 * the server ends it after its answer) and read the answer up to the server's close.
 */
function rawRequest(port: number, head: string, body: Buffer = Buffer.alloc(0)) {
  const socket = connect({ port, host: '127.0.0.1' });
  sockets.push(socket);
  return new Promise<RawAnswer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const received = Buffer.concat(chunks);
      const at = received.indexOf('\r\n\r\n');
      const [statusLine = '', ...lines] = received.subarray(0, at).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({
        status: Number(statusLine.split(' ')[1]),
        headers,
        body: received.subarray(at + 4).toString('utf8'),
      });
    });
    socket.write(Buffer.concat([Buffer.from(`${head}\r\n\r\n`, 'latin1'), body]));
  });
}

const REQUEST = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'echo', params: ['é'] });

async function echoGateway(options = {}) {
  let handled = 0;
  const running = await res.gateway(options);
  running.gateway.method('echo', (params) => {
    handled++;
    return params;
  });
  return { ...running, handled: () => handled };
}

/** POST `body` with Content-Length and `headers` (lines such as `Content-Encoding: gzip`). */
function post(port: number, body: Buffer, headers: string[]) {
  const head = [
    'POST /rpc HTTP/1.1',
    'Host: 127.0.0.1',
    'Connection: close',
    `Content-Length: ${body.length}`,
    ...headers,
  ];
  return rawRequest(port, head.join('\r\n'), body);
}

/** `body` as one chunk of a chunked body, and the last chunk. */
const chunked = (body: Buffer): Buffer =>
  Buffer.concat([
    Buffer.from(`${body.length.toString(16)}\r\n`),
    body,
    Buffer.from('\r\n0\r\n\r\n'),
  ]);

describe('POST /rpc with a body coded otherwise than as plain UTF-8', () => {
  it('Content-Encoding other than identity: 415, closed, whether or not the body is coded', async () => {
    const { port, handled } = await echoGateway();
    for (const [coding, body] of [
      ['gzip', gzipSync(REQUEST)],
      // A plain body said to be brotli is no body the gateway may take as plain either.
      ['br', Buffer.from(REQUEST)],
      ['identity, gzip', gzipSync(REQUEST)],
    ] as const) {
      const answer = await post(port, body, [
        'Content-Type: application/json',
        `Content-Encoding: ${coding}`,
      ]);
      expect(answer.status, coding).toBe(415);
      expect(answer.headers['connection']).toBe('close');
      expect(answer.headers['accept-encoding']).toBe('identity');
      expect(answer.body).toMatch(
        /^Content-Encoding \w+ is not supported: send the body uncompressed\n$/,
      );
    }
    expect(handled()).toBe(0);
  });

  it('a charset other than UTF-8: 415, closed', async () => {
    const { port, handled } = await echoGateway();
    for (const [charset, body] of [
      ['iso-8859-1', Buffer.from(REQUEST, 'latin1')],
      ['utf-16', Buffer.from(`\ufeff${REQUEST}`, 'utf16le')],
      // Read as UTF-8, a UTF-16 body of ASCII-only JSON with no BOM would still be misread.
      ['"UTF-16LE"', Buffer.from(REQUEST, 'utf16le')],
      ['windows-1252', Buffer.from(REQUEST.replace('é', 'e'))],
    ] as const) {
      const answer = await post(port, body, [`Content-Type: application/json; charset=${charset}`]);
      expect(answer.status, charset).toBe(415);
      expect(answer.headers['connection']).toBe('close');
      expect(answer.body).toMatch(/^charset \S+ is not supported: send the body as UTF-8/);
    }
    expect(handled()).toBe(0);
  });

  it('a transfer coding other than chunked: 501, closed', async () => {
    const { port, handled } = await echoGateway();
    const head = [
      'POST /rpc HTTP/1.1',
      'Host: 127.0.0.1',
      'Connection: close',
      'Content-Type: application/json',
      'Transfer-Encoding: gzip, chunked',
    ];
    const answer = await rawRequest(port, head.join('\r\n'), chunked(gzipSync(REQUEST)));
    expect(answer.status).toBe(501);
    expect(answer.headers['connection']).toBe('close');
    expect(answer.body).toBe(
      'Transfer-Encoding gzip is not supported: send the body chunked or with Content-Length\n',
    );
    expect(handled()).toBe(0);
  });

  it('UTF-8 however it is written, identity, and a chunked body are served', async () => {
    const { port, handled } = await echoGateway();
    const body = Buffer.from(REQUEST);
    const served = [
      ['Content-Type: application/json; charset=utf-8'],
      ['Content-Type: application/json; CHARSET="UTF-8"'],
      ['Content-Type: application/json;charset=Utf-8', 'Content-Encoding: identity'],
      // UTF-8's other labels (the WHATWG Encoding standard's), and US-ASCII, a subset of it.
      ['Content-Type: application/json; charset=utf8'],
      ['Content-Type: application/json; charset=unicode-1-1-utf-8'],
    ];
    for (const headers of served) {
      const answer = await post(port, body, headers);
      expect(answer.status, headers.join(', ')).toBe(200);
      expect(JSON.parse(answer.body)).toEqual({ jsonrpc: '2.0', id: 1, result: ['é'] });
    }
    const head = [
      'POST /rpc HTTP/1.1',
      'Host: 127.0.0.1',
      'Connection: close',
      'Content-Type: application/json',
      'Transfer-Encoding: chunked',
    ];
    expect((await rawRequest(port, head.join('\r\n'), chunked(body))).status).toBe(200);
    const ascii = Buffer.from(REQUEST.replace('é', 'e'));
    const asAscii = await post(port, ascii, ['Content-Type: application/json; charset=US-ASCII']);
    expect(asAscii.status).toBe(200);
    expect(handled()).toBe(served.length + 2);
  });
});

describe('OPTIONS /rpc without an Origin', () => {
  const options = (port: number) =>
    rawRequest(
      port,
      ['OPTIONS /rpc HTTP/1.1', 'Host: 127.0.0.1', 'Connection: close'].join('\r\n'),
    );

  it('is no preflight: 204 with the methods the route takes', async () => {
    const { port } = await echoGateway();
    const answer = await options(port);
    expect(answer.status).toBe(204);
    expect(answer.headers['allow']).toBe('GET, POST, OPTIONS');
    expect(answer.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('on a route of its own (not the WebSocket path), GET is not among them', async () => {
    const { port } = await echoGateway({ routes: { rpc: '/rpc' }, path: '/ws' });
    const answer = await options(port);
    expect(answer.status).toBe(204);
    expect(answer.headers['allow']).toBe('POST, OPTIONS');
  });
});
