// createClient's credential options: url, protocols and headers given as functions, the token
// provider and where its token travels, and what a refusal of the credentials does; and the
// inputs of one dial built from them (prepareDial), sync when nothing in them is async.
import { WebSocket } from 'ws';
import { describe, expect, it } from 'vitest';
import { clientDefaults, resolveClientOptions } from '../../src/client/client-options.js';
import { prepareDial } from '../../src/client/dial.js';
import type { WebSocketConstructor } from '../../src/transport/websocket-transport.js';

const url = 'ws://127.0.0.1:1/rpc';
const base = { url, WebSocket };

/** A WebSocket class shaped like a browser's: an EventTarget, no `on`. */
class BrowserLikeWebSocket extends EventTarget {
  constructor(
    readonly url: string,
    readonly protocols?: string | string[],
  ) {
    super();
  }
}
const browserWebSocket = BrowserLikeWebSocket as unknown as WebSocketConstructor;

describe('createClient credential options', () => {
  it('takes url, protocols and headers as functions, sync or async', () => {
    const urlOf = () => Promise.resolve(url);
    const config = resolveClientOptions({
      ...base,
      url: urlOf,
      protocols: () => ['jsonrpc-2.0'],
      headers: () => Promise.resolve({ 'x-trace': '1' }),
      getToken: () => 't',
    });
    expect(config.urls).toEqual([]);
    expect(config.urlOf).toBe(urlOf);
    expect(typeof config.protocols).toBe('function');
    expect(typeof config.headers).toBe('function');
  });

  it('defaults: the token in-band, and a refusal stops the client', () => {
    const config = resolveClientOptions(base);
    expect(config.tokenTransport).toBe('in-band');
    expect(config.reconnect).toMatchObject({ onAuthFailure: 'stop' });
    expect(clientDefaults.reconnect.onAuthFailure).toBe('stop');
    expect(
      resolveClientOptions({ ...base, reconnect: { onAuthFailure: 'retry' } }).reconnect,
    ).toMatchObject({ onAuthFailure: 'retry', initialDelayMs: 250 });
  });

  it('refuses headers, and a header token, with a WebSocket that cannot send them', () => {
    expect(() =>
      resolveClientOptions({ url, WebSocket: browserWebSocket, headers: { a: 'b' } }),
    ).toThrow(
      new TypeError(
        'headers needs the WebSocket of the ws package (Node): this WebSocket cannot send headers; use tokenTransport "in-band"',
      ),
    );
    expect(() =>
      resolveClientOptions({
        url,
        WebSocket: browserWebSocket,
        getToken: () => 't',
        tokenTransport: 'header',
      }),
    ).toThrow('tokenTransport "header" needs the WebSocket of the ws package');
    // In-band is what a browser does: accepted.
    expect(() =>
      resolveClientOptions({ url, WebSocket: browserWebSocket, getToken: () => 't' }),
    ).not.toThrow();
  });

  it('refuses a header value that is not a string, naming the option', () => {
    expect(() => resolveClientOptions({ ...base, headers: { n: 1 } })).toThrow(
      'headers must be an object of header strings or a function, not {"n":1}',
    );
    expect(() => resolveClientOptions({ ...base, protocols: () => 1 })).not.toThrow();
  });
});

describe('prepareDial: the inputs of one dial', () => {
  const signal = new AbortController().signal;

  it('is sync when every input is fixed or sync, so the client dials in its constructor', () => {
    const dial = prepareDial(
      resolveClientOptions({ ...base, protocols: () => 'jsonrpc-2.0', getToken: () => 'tok' }),
      url,
      new AbortController().signal,
    );
    expect(dial).toEqual({ url, protocols: 'jsonrpc-2.0', headers: undefined, token: 'tok' });
  });

  it('calls each function on every dial, and waits for the async ones', async () => {
    let n = 0;
    const config = resolveClientOptions({
      ...base,
      url: () => Promise.resolve(`ws://127.0.0.1:1/rpc?n=${++n}`),
      headers: () => ({ 'x-dial': String(n) }),
      getToken: () => Promise.resolve(`token-${n}`),
      tokenTransport: 'header',
    });
    const first = await prepareDial(config, '', signal);
    const second = await prepareDial(config, '', signal);
    expect(first.url).toBe('ws://127.0.0.1:1/rpc?n=1');
    expect(second).toEqual({
      url: 'ws://127.0.0.1:1/rpc?n=2',
      protocols: undefined,
      headers: { 'x-dial': '2', Authorization: 'Bearer token-2' },
      token: undefined,
    });
  });

  it('refuses what a function gives that cannot be used', async () => {
    const badUrl = resolveClientOptions({ ...base, url: () => 'not a url' });
    expect(() => prepareDial(badUrl, '', signal)).toThrow(RangeError);
    const badToken = resolveClientOptions({
      ...base,
      getToken: () => Promise.resolve(42 as unknown as string),
    });
    await expect(prepareDial(badToken, url, signal)).rejects.toThrow(
      'getToken must give a string, not number',
    );
  });
});
