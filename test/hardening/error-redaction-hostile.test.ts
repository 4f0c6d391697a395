/**
 * Errors of any shape a handler may throw reach the log without a credential and without making
 * the logging throw: over WebSocket a throw there would end the gateway's process (an uncaught
 * exception), over POST /rpc it would turn the call's answer into a 500. Among them: a message or
 * stack that is not a string, a frozen error, a getter that throws, a host object (DOMException,
 * whose getters refuse a copy), an error that refers to itself, and an HTTP client's error that
 * carries the request (a class instance whose `_header` is the request's head as text).
 */
import { once } from 'node:events';
import { createServer, request } from 'node:http';
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { scrubLogged } from '../../src/index.js';
import { capturedPino } from '../support/logging.js';
import { Resources } from '../support/resources.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

function linesNamed(lines: readonly string[], msg: string): Record<string, unknown>[] {
  return lines
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line['msg'] === msg);
}

/** Errors a handler may throw that are not shaped like `new Error('text')`. */
const hostileErrors: Record<string, () => unknown> = {
  'message undefined': () => Object.assign(new Error(), { message: undefined }),
  'message a number': () => Object.assign(new Error('x'), { message: 42 }),
  'message an object': () =>
    Object.assign(new Error('x'), { message: { detail: 1, token: 'SECRET-A' } }),
  'stack not a string': () => Object.assign(new Error('x'), { stack: { frames: [] } }),
  frozen: () => Object.freeze(new Error('frozen')),
  'a getter that throws': () =>
    Object.defineProperty(new Error('getter'), 'detail', {
      enumerable: true,
      get: () => {
        throw new Error('no detail');
      },
    }),
  DOMException: () =>
    new DOMException('GET https://h.example/?token=SECRET-B failed', 'AbortError'),
  'refers to itself': () => {
    const error = new Error('self') as Error & Record<string, unknown>;
    error['self'] = error;
    error['headers'] = { authorization: 'Bearer SECRET-C' };
    return error;
  },
};

/** A gateway whose `boom` throws hostileErrors[params.kind], and an `echo`. */
async function hostileGateway() {
  const { logger, lines } = capturedPino();
  const running = await res.gateway({ logger });
  running.gateway.method('boom', (params) => {
    throw hostileErrors[(params as { kind: string }).kind]!();
  });
  running.gateway.method('echo', (params) => params);
  return { ...running, lines };
}

async function postRpc(httpUrl: string, body: unknown) {
  const answer = await fetch(`${httpUrl}/rpc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: answer.status, text: await answer.text() };
}

/** A local HTTP server answering 401 with a cookie, as an upstream refusing a call would. */
async function refusingUpstream(): Promise<string> {
  const server = createServer((_req, reply) => {
    reply.writeHead(401, { 'set-cookie': 'sid=SECRET-F; HttpOnly', 'content-type': 'text/plain' });
    reply.end('denied');
  });
  res.netServers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/charge?token=SECRET-G`;
}

/** What an HTTP client (axios) throws on a 401: the request itself and the response among its properties. */
async function clientErrorFrom(url: string): Promise<Error> {
  const sent: ClientRequest = request(url, {
    headers: { Authorization: 'Bearer SECRET-D', Cookie: 'sid=SECRET-E' },
  });
  sent.end();
  const [answer] = (await once(sent, 'response')) as [IncomingMessage];
  answer.resume();
  await once(answer, 'end');
  return Object.assign(new Error(`Request failed with status code ${answer.statusCode}`), {
    request: sent,
    response: { status: answer.statusCode, headers: answer.headers, request: sent },
  });
}

describe('hostile errors thrown by a handler', () => {
  it('over WebSocket: each is answered -32603, logged without a secret, and the gateway keeps serving', async () => {
    const { url, lines } = await hostileGateway();
    const raw = await openRaw(res, url);
    for (const kind of Object.keys(hostileErrors)) {
      expect((await raw.request('boom', { kind })).error?.code, kind).toBe(-32603);
      expect((await raw.request('echo', { kind })).result, kind).toEqual({ kind });
    }
    const failed = linesNamed(lines, 'handler failed');
    expect(failed).toHaveLength(Object.keys(hostileErrors).length);
    expect(lines.join('')).not.toContain('SECRET');
    const byKind = (n: number) => failed[n]!['err'] as Record<string, unknown>;
    expect(byKind(0)).toMatchObject({ type: 'Error' });
    expect(byKind(1)).toMatchObject({ type: 'Error', message: 42 });
    expect(byKind(2)).toMatchObject({ message: { detail: 1, token: '[redacted]' } });
    expect(byKind(3)).toMatchObject({ type: 'Error', message: 'x', stack: { frames: [] } });
    expect(byKind(4)).toMatchObject({ type: 'Error', message: 'frozen' });
    expect(byKind(5)).toMatchObject({ message: 'getter', detail: '[Unreadable]' });
    expect(byKind(6)).toMatchObject({
      type: 'AbortError',
      message: 'GET https://h.example/?token=[redacted] failed',
    });
    expect(byKind(7)).toMatchObject({
      message: 'self',
      self: '[Circular]',
      headers: { authorization: '[redacted]' },
    });
  });

  it('over POST /rpc: each is answered -32603 (not a 500) and logged without a secret', async () => {
    const { httpUrl, lines } = await hostileGateway();
    for (const kind of Object.keys(hostileErrors)) {
      const answer = await postRpc(httpUrl, {
        jsonrpc: '2.0',
        id: 1,
        method: 'boom',
        params: { kind },
      });
      expect(answer.status, kind).toBe(200);
      expect((JSON.parse(answer.text) as { error: { code: number } }).error.code, kind).toBe(
        -32603,
      );
    }
    expect(linesNamed(lines, 'handler failed')).toHaveLength(Object.keys(hostileErrors).length);
    expect(linesNamed(lines, 'http handler failed')).toHaveLength(0);
    expect(lines.join('')).not.toContain('SECRET');
  });

  it("an HTTP client's error carrying the real request and its response: no header, cookie or token of theirs is logged", async () => {
    const upstream = await refusingUpstream();
    const { logger, lines } = capturedPino();
    const { gateway, url } = await res.gateway({ logger });
    gateway.method('charge', async () => {
      throw await clientErrorFrom(upstream);
    });
    const raw = await openRaw(res, url);
    expect((await raw.request('charge')).error?.code).toBe(-32603);
    const failed = linesNamed(lines, 'handler failed');
    expect(failed).toHaveLength(1);
    expect(lines.join('')).not.toContain('SECRET');
    expect(failed[0]!['err']).toMatchObject({
      type: 'Error',
      message: 'Request failed with status code 401',
      request: { _header: '[redacted]', method: 'GET' },
      response: { status: 401, headers: { 'set-cookie': '[redacted]' } },
    });
  });
});

describe('scrubLogged on errors of any shape', () => {
  it('never throws, and never hands back an original that still holds a secret', () => {
    for (const [kind, make] of Object.entries(hostileErrors)) {
      const error = make();
      const scrubbed = (scrubLogged({ err: error }) as { err: unknown }).err;
      expect(JSON.stringify(scrubbed) ?? '', kind).not.toContain('SECRET');
    }
  });

  it('past its depth an object is written [Truncated]; a cycle [Circular]; a shared object twice', () => {
    let deep: Record<string, unknown> = { authorization: 'Bearer SECRET-H' };
    for (let i = 0; i < 12; i++) deep = { deeper: deep };
    const shared = { note: 'twice' };
    const error = Object.assign(new Error('deep'), { deep, a: shared, b: shared });
    const scrubbed = (scrubLogged({ err: error }) as { err: Record<string, unknown> }).err;
    expect(JSON.stringify(scrubbed)).toContain('"[Truncated]"');
    expect(JSON.stringify(scrubbed)).not.toContain('SECRET');
    expect(scrubbed).toMatchObject({ a: { note: 'twice' }, b: { note: 'twice' } });

    const cyclic: Record<string, unknown> = { token: 'SECRET-I' };
    cyclic['again'] = cyclic;
    const withCycle = Object.assign(new Error('cycle'), { cyclic });
    const line = (scrubLogged({ err: withCycle }) as { err: Record<string, unknown> }).err;
    expect(line['cyclic']).toEqual({ token: '[redacted]', again: '[Circular]' });
  });

  it('a header written as text inside an error is blanked, its name kept', () => {
    class Outgoing {
      outputData = [
        { data: 'GET /x HTTP/1.1\r\nAuthorization: Bearer SECRET-J\r\nAccept: */*\r\n' },
      ];
    }
    const error = Object.assign(new Error('failed'), { request: new Outgoing() });
    const scrubbed = (scrubLogged({ err: error }) as { err: { request: unknown } }).err;
    expect(scrubbed.request).toEqual({
      outputData: [{ data: 'GET /x HTTP/1.1\r\nAuthorization: [redacted]\r\nAccept: */*\r\n' }],
    });
    expect(scrubLogged({ rawHeader: 'Cookie: sid=SECRET-K' })).toEqual({
      rawHeader: 'Cookie: [redacted]',
    });
  });
});
