import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { RpcClient } from '../../src/client/client.js';
import { method } from '../../src/peer/method-descriptor.js';

/*
 * The client's handlers for the server's calls are refused at registration as the server's
 * are: a handler the server's calls would find not to be a function, or a name no call can
 * carry, throws at `client.method`, naming what is wrong.
 */

const clients: RpcClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
});

function client(): RpcClient {
  // Nothing listens there (a port of this test's range): registration needs no connection.
  const made = new RpcClient({
    url: 'ws://127.0.0.1:20431/rpc',
    WebSocket,
    reconnect: { initialDelayMs: 1_000, maxDelayMs: 1_000 },
  });
  clients.push(made);
  return made;
}

/** A value the types would refuse, as a JavaScript caller may pass it. */
const bad = (value: unknown): never => value as never;

describe('client.method', () => {
  it('refuses a handler that is not a function, and registers nothing', () => {
    const c = client();
    expect(() => c.method('confirm', bad(42))).toThrow(
      new TypeError('method "confirm": handler must be a function, not 42'),
    );
    expect(c.registry.has('confirm')).toBe(false);
    expect(() => c.method('confirm', () => true)).not.toThrow();
  });

  it('refuses a name that is not a non-empty string, or is reserved', () => {
    const c = client();
    expect(() => c.method(bad(42), () => 1)).toThrow(TypeError);
    expect(() => c.method('', () => 1)).toThrow(RangeError);
    expect(() => c.method(method(''), () => 1)).toThrow(RangeError);
    expect(() => c.method('rpc.token', () => 1)).toThrow(
      new RangeError(
        'method name must be a non-empty string, not starting with "rpc." (reserved), not "rpc.token"',
      ),
    );
    expect(c.registry.names()).toEqual([]);
  });
});
