import { WebSocket } from 'ws';
import { describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import {
  clientDefaults,
  clientOptionRules,
  heartbeatRules,
  reconnectRules,
  resolveClientOptions,
} from '../../src/client/client-options.js';
import { TimeoutError, silentLogger } from '../../src/index.js';
import { peerConfig } from '../../src/peer/peer-options.js';
import { PendingCalls } from '../../src/peer/pending-calls.js';
import { openCall } from '../support/peers.js';

const url = 'ws://127.0.0.1:1/rpc';
const base = { url, WebSocket };

/** One refused value per option that can be refused: the error class and what its message says. */
const refused: [
  name: string,
  options: Record<string, unknown>,
  error: typeof TypeError,
  says: string,
][] = [
  [
    'unknown option',
    { callTimeot: 1 },
    TypeError,
    'callTimeot is not an option of createClient (did you mean callTimeoutMs?)',
  ],
  [
    'middleware',
    { middleware: 'log' },
    TypeError,
    'middleware must be an array of functions, not "log"',
  ],
  ['url type', { url: 1 }, TypeError, 'url must be a URL or a non-empty array of URLs, not 1'],
  [
    'url empty list',
    { url: [] },
    TypeError,
    'url must be a URL or a non-empty array of URLs, not []',
  ],
  [
    'url not a URL',
    { url: 'ws//host/rpc?token=SECRET' },
    RangeError,
    'url must be a URL such as "wss://host/rpc", not "ws//host/rpc"',
  ],
  ['url list member', { url: [url, 5] }, TypeError, 'url[1] must be a URL string, not 5'],
  ['WebSocket', { WebSocket: 'ws' }, TypeError, 'WebSocket must be a WebSocket class, not "ws"'],
  [
    'protocols',
    { protocols: [1] },
    TypeError,
    'protocols must be a string, an array of strings or a function, not [1]',
  ],
  [
    'encoding',
    { encoding: 'msgpack' },
    TypeError,
    'encoding must be "json" or a codec (msgpack from wsrpc-gateway/msgpack, cbor from wsrpc-gateway/cbor), not "msgpack"',
  ],
  [
    'headers',
    { headers: { authorization: 1 } },
    TypeError,
    'headers must be an object of header strings or a function, not {"authorization":"a number"}',
  ],
  // A token given as text where a function is expected is told by its length, not echoed.
  [
    'getToken',
    { getToken: 'abc' },
    TypeError,
    'getToken must be a function, not a string of 3 characters',
  ],
  [
    'tokenTransport',
    { tokenTransport: 'query' },
    RangeError,
    'tokenTransport must be "in-band" or "header", not "query"',
  ],
  [
    'reconnect type',
    { reconnect: true },
    TypeError,
    'reconnect must be an object { initialDelayMs, maxDelayMs, factor, jitter, resetAfterMs, onAuthFailure, maxAttempts } or false, not true',
  ],
  [
    'reconnect key',
    { reconnect: { initialDelay: 1 } },
    TypeError,
    'reconnect.initialDelay is not an option of reconnect (did you mean reconnect.initialDelayMs?)',
  ],
  [
    'reconnect.initialDelayMs',
    { reconnect: { initialDelayMs: -1 } },
    RangeError,
    'reconnect.initialDelayMs must be a number from 0 to 2147483647, not -1',
  ],
  [
    'reconnect.maxDelayMs',
    { reconnect: { maxDelayMs: 2 ** 31 } },
    RangeError,
    'reconnect.maxDelayMs must be a number from 0 to 2147483647',
  ],
  [
    'reconnect.factor',
    { reconnect: { factor: 0.5 } },
    RangeError,
    'reconnect.factor must be a number at least 1, not 0.5',
  ],
  [
    'reconnect.jitter',
    { reconnect: { jitter: 2 } },
    RangeError,
    'reconnect.jitter must be a number from 0 to 1, not 2',
  ],
  [
    'reconnect.resetAfterMs',
    { reconnect: { resetAfterMs: '5s' } },
    TypeError,
    'reconnect.resetAfterMs must be a number at least 0, not "5s"',
  ],
  [
    'reconnect.onAuthFailure',
    { reconnect: { onAuthFailure: 'ignore' } },
    RangeError,
    'reconnect.onAuthFailure must be "stop" or "retry", not "ignore"',
  ],
  [
    'reconnect.maxAttempts',
    { reconnect: { maxAttempts: -1 } },
    RangeError,
    'reconnect.maxAttempts must be an integer at least 0 or Infinity, not -1',
  ],
  [
    'connectTimeoutMs',
    { connectTimeoutMs: 0 },
    RangeError,
    'connectTimeoutMs must be a number at least 1, not 0',
  ],
  [
    'callTimeoutMs',
    { callTimeoutMs: -5 },
    RangeError,
    'callTimeoutMs must be a number at least 0 (0: no timeout), not -5',
  ],
  [
    'callTimeout',
    { callTimeout: 'x' },
    TypeError,
    'callTimeout must be a number at least 0 (0: no timeout), not "x"',
  ],
  [
    'whenDisconnected',
    { whenDisconnected: 'drop' },
    RangeError,
    'whenDisconnected must be "queue" or "reject", not "drop"',
  ],
  ['maxQueued', { maxQueued: 1.5 }, RangeError, 'maxQueued must be an integer at least 0, not 1.5'],
  [
    'maxPendingCalls',
    { maxPendingCalls: 0 },
    RangeError,
    'maxPendingCalls must be an integer at least 1, not 0',
  ],
  ['maxJoined', { maxJoined: -1 }, RangeError, 'maxJoined must be an integer at least 0, not -1'],
  [
    'maxBufferedBytes',
    { maxBufferedBytes: 1.5 },
    RangeError,
    'maxBufferedBytes must be an integer at least 0, not 1.5',
  ],
  [
    'maxMessageBytes',
    { maxMessageBytes: -1 },
    RangeError,
    'maxMessageBytes must be an integer at least 0, not -1',
  ],
  [
    'batchCalls',
    { batchCalls: -1 },
    RangeError,
    'batchCalls must be an integer at least 0, not -1',
  ],
  [
    'heartbeat type',
    { heartbeat: 20_000 },
    TypeError,
    'heartbeat must be an object { intervalMs, timeoutMs } or false, not 20000',
  ],
  [
    'heartbeat key',
    { heartbeat: { interval: 1 } },
    TypeError,
    'heartbeat.interval is not an option of heartbeat (did you mean heartbeat.intervalMs?)',
  ],
  [
    'heartbeat.intervalMs',
    { heartbeat: { intervalMs: 0 } },
    RangeError,
    'heartbeat.intervalMs must be a number from 1 to 2147483647, not 0',
  ],
  [
    'heartbeat.timeoutMs',
    { heartbeat: { timeoutMs: 0 } },
    RangeError,
    'heartbeat.timeoutMs must be a number at least 1, not 0',
  ],
  ['inbox', { inbox: 'yes' }, TypeError, 'inbox must be a boolean, not "yes"'],
  [
    'networkEvents',
    { networkEvents: 'on' },
    TypeError,
    'networkEvents must be a boolean, not "on"',
  ],
  [
    'subscriptionMethods type',
    { subscriptionMethods: [] },
    TypeError,
    'subscriptionMethods must be an object { subscribe, notification, unsubscribe }',
  ],
  [
    'subscriptionMethods key',
    { subscriptionMethods: { subscribes: 'x' } },
    TypeError,
    'subscriptionMethods.subscribes is not an option of subscriptionMethods',
  ],
  [
    'subscriptionMethods value',
    { subscriptionMethods: { subscribe: 1 } },
    TypeError,
    'subscriptionMethods.subscribe must be a string, not 1',
  ],
  ['logger', { logger: 'console' }, TypeError, 'logger must be a logger, not "console"'],
  [
    'old and new name differ',
    { callTimeout: 1_000, callTimeoutMs: 2_000 },
    TypeError,
    'callTimeout is the old name of callTimeoutMs: give one of them, not both',
  ],
];

describe('resolveClientOptions: the one step that checks createClient options', () => {
  it.each(refused)(
    'refuses %s, naming the option and what it may be',
    (_, options, error, says) => {
      const refusal = (): unknown => resolveClientOptions({ ...base, ...options });
      expect(refusal).toThrow(error);
      expect(refusal).toThrow(says);
    },
  );

  it('has a refusal case for every option, and for every field of reconnect and heartbeat', () => {
    const covered = new Set(refused.map(([name]) => name.split(' ')[0]));
    for (const name of Object.keys(clientOptionRules)) expect(covered).toContain(name);
    for (const name of Object.keys(reconnectRules)) expect(covered).toContain(`reconnect.${name}`);
    for (const name of Object.keys(heartbeatRules)) expect(covered).toContain(`heartbeat.${name}`);
  });

  it('refuses options that are not an object, and a missing WebSocket class', () => {
    expect(() => resolveClientOptions('ws://x')).toThrow(TypeError);
    const global = globalThis as { WebSocket?: unknown };
    const saved = global.WebSocket;
    delete global.WebSocket;
    try {
      expect(() => resolveClientOptions({ url })).toThrow('No WebSocket implementation');
    } finally {
      if (saved) global.WebSocket = saved;
    }
  });

  it('never shows the token of a URL it refuses', () => {
    expect(() => resolveClientOptions({ ...base, url: 'ws//host/rpc?token=SECRET' })).toThrow(
      expect.objectContaining({ message: expect.not.stringContaining('SECRET') as string }),
    );
  });

  it('createClient itself throws', () => {
    expect(() => createClient({ ...base, maxQueued: -1 })).toThrow(RangeError);
    expect(() =>
      createClient({ ...base, heartbeat: { intervalMs: 'x' as unknown as number } }),
    ).toThrow('heartbeat.intervalMs must be');
  });

  it('fills every default in, from clientDefaults, and is frozen', () => {
    const config = resolveClientOptions(base);
    expect(config).toEqual({
      urls: [url],
      urlOf: undefined,
      WebSocket,
      protocols: undefined,
      headers: undefined,
      getToken: undefined,
      tokenTransport: 'in-band',
      reconnect: clientDefaults.reconnect,
      connectTimeoutMs: 10_000,
      callTimeoutMs: 30_000,
      whenDisconnected: 'queue',
      maxQueued: 100,
      maxPendingCalls: 1024,
      maxJoined: 1000,
      maxBufferedBytes: 4 * 1024 * 1024,
      maxMessageBytes: 100 * 1024 * 1024,
      batchCalls: 0,
      heartbeat: { intervalMs: 20_000, timeoutMs: 10_000 },
      networkEvents: true,
      inbox: false,
      subscriptionMethods: clientDefaults.subscriptionMethods,
      logger: silentLogger,
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.urls)).toBe(true);
    expect(Object.isFrozen(config.reconnect)).toBe(true);
    expect(Object.isFrozen(config.heartbeat)).toBe(true);
    expect(Object.isFrozen(config.subscriptionMethods)).toBe(true);
    expect(Object.isFrozen(clientDefaults)).toBe(true);
  });

  it('merges the fields given over the defaults, and takes false for reconnect and heartbeat', () => {
    const config = resolveClientOptions({
      ...base,
      url: [url, 'wss://b.example/rpc'],
      reconnect: { initialDelayMs: 5, maxDelayMs: undefined },
      heartbeat: false,
    });
    expect(config.urls).toEqual([url, 'wss://b.example/rpc']);
    expect(config.reconnect).toEqual({ ...clientDefaults.reconnect, initialDelayMs: 5 });
    expect(config.heartbeat).toBe(false);
    expect(resolveClientOptions({ ...base, reconnect: false }).reconnect).toBe(false);
  });

  it('takes callTimeout as an alias of callTimeoutMs', () => {
    expect(resolveClientOptions({ ...base, callTimeout: 0 }).callTimeoutMs).toBe(0);
    expect(resolveClientOptions({ ...base, callTimeout: 7, callTimeoutMs: 7 }).callTimeoutMs).toBe(
      7,
    );
  });

  it('is what the client reads', async () => {
    const client = createClient({ ...base, callTimeoutMs: 123, reconnect: false });
    expect(client.config.callTimeoutMs).toBe(123);
    await client.close();
  });
});

describe('the peer and per-call options keep their old names as aliases', () => {
  it('PeerOptions.callTimeout is callTimeoutMs; both given with different values is refused', () => {
    expect(peerConfig({ callTimeout: 7 }).callTimeoutMs).toBe(7);
    expect(peerConfig({}).callTimeoutMs).toBe(30_000);
    expect(() => peerConfig({ callTimeout: 7, callTimeoutMs: 8 })).toThrow(TypeError);
  });

  it('CallOptions.timeout is timeoutMs, which wins when both are given', async () => {
    const calls = new PendingCalls(10, 0, () => undefined);
    const old = openCall(calls, 'old', { timeout: 5 }).promise;
    await expect(old).rejects.toBeInstanceOf(TimeoutError);
    const both = openCall(calls, 'both', { timeout: 60_000, timeoutMs: 5 }).promise;
    await expect(both).rejects.toBeInstanceOf(TimeoutError);
  });
});

describe("url with the platform's own WebSocket (a browser's)", () => {
  /** resolveClientOptions as in a page at `href`, whose global WebSocket is the one used. */
  function inPage<T>(href: string, run: () => T): T {
    const globals = globalThis as { WebSocket?: unknown; location?: unknown };
    const saved = { WebSocket: globals.WebSocket, location: globals.location };
    globals.WebSocket = class PageWebSocket {};
    globals.location = { href };
    try {
      return run();
    } finally {
      globals.WebSocket = saved.WebSocket;
      globals.location = saved.location;
    }
  }

  it('a URL without a scheme (read as the scheme "localhost:") is refused, naming it', () => {
    expect(() =>
      inPage('http://localhost:5173/', () => resolveClientOptions({ url: 'localhost:8080/rpc' })),
    ).toThrow(
      new RangeError(
        'url must be a ws:, wss:, http: or https: URL such as "wss://host/rpc" (this one\'s scheme is "localhost:"), not "localhost://8080/rpc"',
      ),
    );
    expect(() =>
      inPage('http://localhost:5173/', () => resolveClientOptions({ url: 'ftp://host/rpc' })),
    ).toThrow(RangeError);
  });

  it('a relative or http(s) URL is made the absolute ws(s) URL every browser takes', () => {
    const urls = inPage('https://app.example/page/', () =>
      resolveClientOptions({
        url: [
          '/rpc',
          'https://gw.example/rpc',
          'http://gw.example:8080/rpc',
          'wss://gw.example/rpc',
        ],
      }),
    ).urls;
    expect(urls).toEqual([
      'wss://app.example/rpc',
      'wss://gw.example/rpc',
      'ws://gw.example:8080/rpc',
      'wss://gw.example/rpc',
    ]);
  });

  it("ws's WebSocket put on the global (an isomorphic app's polyfill) keeps its own schemes", () => {
    const globals = globalThis as { WebSocket?: unknown };
    const saved = globals.WebSocket;
    globals.WebSocket = WebSocket;
    try {
      expect(resolveClientOptions({ url: 'ws+unix:///tmp/gw.sock:/rpc' }).urls).toEqual([
        'ws+unix:///tmp/gw.sock:/rpc',
      ]);
    } finally {
      globals.WebSocket = saved;
    }
  });

  it("with a WebSocket class given, the URL is passed on as written (its scheme is that class's)", () => {
    expect(resolveClientOptions({ url: 'tcp://127.0.0.1:9000', WebSocket }).urls).toEqual([
      'tcp://127.0.0.1:9000',
    ]);
  });
});
