import { WebSocket } from 'ws';
import { describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { resolveClientOptions } from '../../src/client/client-options.js';
import { createGateway, silentLogger } from '../../src/index.js';
import type { Middleware, Session } from '../../src/index.js';
import { resolveGatewayOptions } from '../../src/server/gateway-config.js';

const base = { url: 'ws://127.0.0.1:1/rpc', WebSocket };
const pass: Middleware<Session> = (_ctx, next) => next();

/** Each kind of refused `middleware` value, and what the refusal says. */
const refused: [what: string, middleware: unknown, says: string][] = [
  ['a function', () => undefined, 'middleware must be an array of functions, not a function'],
  ['an object', { log: pass }, 'middleware must be an array of functions, not {}'],
  ['a string', 'log', 'middleware must be an array of functions, not "log"'],
  ['a null entry', [pass, null], 'middleware[1] must be a function, not null'],
  ['an object entry', [pass, pass, { handle: pass }], 'middleware[2] must be a function, not {}'],
];

describe('the middleware option', () => {
  it.each(refused)('createGateway refuses %s', (_, middleware, says) => {
    expect(() => resolveGatewayOptions({ middleware })).toThrow(new TypeError(says));
    expect(() => createGateway({ logger: silentLogger, middleware } as never)).toThrow(says);
  });

  it.each(refused)('createClient refuses %s', (_, middleware, says) => {
    expect(() => resolveClientOptions({ ...base, middleware })).toThrow(new TypeError(says));
    expect(() => createClient({ ...base, middleware } as never)).toThrow(says);
  });

  it('takes an array of functions, in order, as a frozen copy; none by default', () => {
    const other: Middleware<Session> = async (_ctx, next) => next();
    const given = [pass, other];
    const gateway = resolveGatewayOptions({ middleware: given });
    expect(gateway.middleware).toEqual([pass, other]);
    expect(gateway.middleware).not.toBe(given);
    expect(Object.isFrozen(gateway.middleware)).toBe(true);
    expect(Object.isFrozen(given)).toBe(false);
    expect(resolveGatewayOptions({}).middleware).toBeUndefined();
    expect(resolveGatewayOptions({ middleware: [] }).middleware).toEqual([]);

    const client = resolveClientOptions({ ...base, middleware: [pass] });
    expect(client.middleware).toEqual([pass]);
    expect(Object.isFrozen(client.middleware)).toBe(true);
    expect(resolveClientOptions(base).middleware).toBeUndefined();
  });

  it('suggests middleware for a near miss', () => {
    expect(() => resolveGatewayOptions({ midleware: [] })).toThrow(
      'midleware is not an option of createGateway (did you mean middleware?)',
    );
    expect(() => resolveClientOptions({ ...base, middlewares: [] })).toThrow(
      'middlewares is not an option of createClient (did you mean middleware?)',
    );
  });
});
