/**
 * What a caller is told of its own mistakes: params that are neither an array nor an object
 * (JSON-RPC 2.0 §4.2: a habit from `emit('chat', 'hello')`) are refused with a TypeError before
 * anything is sent, connected or queued, for calls and notifications alike; and an error the other
 * side answers a call with names the call's method (`err.method`), from either end.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  InvalidParamsError,
  MethodNotFoundError,
  TimeoutError,
  createClient,
} from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { freePort } from '../support/network.js';
import { WebSocket } from 'ws';

const res = new Resources();
afterEach(() => res.cleanup());

const notByPosition =
  /params must be an array or an object \(JSON-RPC 2\.0 §4\.2\), not (string|number|boolean|null)/;

describe('params the spec does not allow', () => {
  it('are refused with a TypeError, connected or not, and nothing reaches the server', async () => {
    const { gateway, url } = await res.gateway();
    const seen: unknown[] = [];
    gateway.method('m', (params) => {
      seen.push(params);
      return 'ran';
    });
    const client = res.client(url);
    await client.opened();
    const [session] = gateway.sessions.values();
    const notified: unknown[] = [];
    session!.notifications$.subscribe(({ params }) => notified.push(params));
    for (const params of ['hello', 5, true, null]) {
      await expect(client.call('m', params as never)).rejects.toThrow(TypeError);
      await expect(client.call('m', params as never)).rejects.toThrow(notByPosition);
      expect(() => client.notify('n', params as never)).toThrow(notByPosition);
    }
    client.notify('n', ['after']);
    expect(await client.call('m', ['hello'])).toBe('ran');
    expect(seen).toEqual([['hello']]);
    expect(notified).toEqual([['after']]);

    // Not connected: refused at once, not queued for a flush that would send it.
    const offline = createClient({
      url: `ws://127.0.0.1:${await freePort()}/rpc`,
      WebSocket,
      reconnect: false,
    });
    await expect(offline.call('m', 'hello' as never)).rejects.toThrow(notByPosition);
    expect(() => offline.notify('n', 'hello' as never)).toThrow(notByPosition);
    await offline.close();
  });
});

describe('an error answering a call', () => {
  it('names the call’s method, on the client and on the server’s calls to a client', async () => {
    const { gateway, url } = await res.gateway();
    gateway.method('strict', () => {
      throw new InvalidParamsError('Invalid params', { field: 'a' });
    });
    const client = res.client(url);
    await client.opened();
    const missing = await client.call('nope', []).catch((err: unknown) => err);
    expect(missing).toBeInstanceOf(MethodNotFoundError);
    expect(missing).toMatchObject({ code: -32601, message: 'Method not found', method: 'nope' });
    const invalid = await client.call('strict', { a: 1 }).catch((err: unknown) => err);
    expect(invalid).toMatchObject({ code: -32602, data: { field: 'a' }, method: 'strict' });

    const [session] = gateway.sessions.values();
    const fromServer = await session!.call('unknownOnClient', []).catch((err: unknown) => err);
    expect(fromServer).toBeInstanceOf(MethodNotFoundError);
    expect(fromServer).toMatchObject({ method: 'unknownOnClient' });
  });
});

describe('a call that never left the client', () => {
  it('times out saying why the last attempt to connect failed: a wrong path’s 404, a refused port', async () => {
    const { httpUrl } = await res.gateway();
    const wrongPath = res.client(`${httpUrl.replace('http', 'ws')}/no-such-path`);
    const notFound = await wrongPath
      .call('sum', [1, 2], { timeoutMs: 1_500 })
      .catch((err: unknown) => err);
    expect(notFound).toBeInstanceOf(TimeoutError);
    expect((notFound as TimeoutError).sent).toBe(false);
    expect((notFound as Error).message).toMatch(
      /never sent: no connection was open \(last attempt: HTTP 404/,
    );
    const port = await freePort();
    const refused = res.client(`ws://127.0.0.1:${port}/rpc`);
    const error = await refused
      .call('sum', [1, 2], { timeoutMs: 1_500 })
      .catch((err: unknown) => err);
    expect((error as Error).message).toMatch(/\(last attempt: .*ECONNREFUSED/);
  });
});
