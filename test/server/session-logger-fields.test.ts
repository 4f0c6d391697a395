import { expect, it } from 'vitest';
import { childLoggerOf } from '../../src/peer/lazy-child-logger.js';
import type { Logger } from '../../src/peer/logger.js';

/*
 * A gateway holds one lazy child logger per session: it keeps one field (the value to bind,
 * which the child replaces once made); the parent and the key are its class's, one class for
 * every logger of the same parent and key.
 */

function parentAt(level: 'info' | 'warn') {
  const lines: string[] = [];
  const make = (bindings: Record<string, unknown>): Logger => {
    const line = (_obj: unknown, msg?: string) =>
      void lines.push(`${JSON.stringify(bindings)} ${msg}`);
    return {
      trace: line,
      debug: line,
      info: line,
      warn: line,
      error: line,
      child: (more) => make({ ...bindings, ...more }),
    };
  };
  const order = ['trace', 'debug', 'info', 'warn', 'error'];
  const parent = Object.assign(make({}), {
    isLevelEnabled: (l: string) => order.indexOf(l) >= order.indexOf(level),
  });
  return { parent, lines };
}

it('a session logger holds one field, before and after its child is made', () => {
  const { parent, lines } = parentAt('warn');
  const first = childLoggerOf(parent, 'session', 's-1');
  const second = childLoggerOf(parent, 'session', 's-2');
  expect(Object.keys(first)).toHaveLength(1);

  first.info({}, 'below the level');
  expect(Object.keys(first)).toHaveLength(1);
  first.warn({}, 'made');
  expect(Object.keys(first)).toHaveLength(1);
  second.error({}, 'other');
  second.child({ call: 7 }).warn({}, 'child');

  expect(lines).toEqual([
    '{"session":"s-1"} made',
    '{"session":"s-2"} other',
    '{"session":"s-2","call":7} child',
  ]);
});

it('loggers of one parent and key share their class, whatever the order they are made in', () => {
  const a = parentAt('info');
  const b = parentAt('info');
  const loggers = [a, b, a, b].map(({ parent }, i) => childLoggerOf(parent, 'session', `s-${i}`));

  expect(Object.getPrototypeOf(loggers[0])).toBe(Object.getPrototypeOf(loggers[2]));
  expect(Object.getPrototypeOf(loggers[1])).toBe(Object.getPrototypeOf(loggers[3]));
  expect(Object.getPrototypeOf(loggers[0])).not.toBe(Object.getPrototypeOf(loggers[1]));
  loggers[3]!.info({}, 'to b');
  expect(b.lines).toEqual(['{"session":"s-3"} to b']);
  expect(a.lines).toEqual([]);
});
