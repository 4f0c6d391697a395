import { expect, it } from 'vitest';
import { LazyChildLogger } from '../../src/peer/lazy-child-logger.js';
import type { Logger } from '../../src/peer/logger.js';

/*
 * A gateway holds one LazyChildLogger per session: it keeps two fields (the origin every logger
 * of the same parent and key shares, and the value to bind, which the child replaces once made).
 */

function parentAt(level: 'info' | 'warn'): Logger & { isLevelEnabled(l: string): boolean } {
  const lines: string[] = [];
  const make = (bindings: Record<string, unknown>): Logger => {
    const line = (obj: unknown, msg?: string) =>
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
  return Object.assign(make({}), {
    isLevelEnabled: (l: string) => order.indexOf(l) >= order.indexOf(level),
    lines,
  });
}

it('a session logger holds two fields, before and after its child is made', () => {
  const parent = parentAt('warn');
  const first = new LazyChildLogger(parent, 'session', 's-1');
  const second = new LazyChildLogger(parent, 'session', 's-2');
  expect(Object.keys(first)).toHaveLength(2);

  first.info({}, 'below the level');
  expect(Object.keys(first)).toHaveLength(2);
  first.warn({}, 'made');
  expect(Object.keys(first)).toHaveLength(2);
  second.error({}, 'other');

  expect((parent as unknown as { lines: string[] }).lines).toEqual([
    '{"session":"s-1"} made',
    '{"session":"s-2"} other',
  ]);
});
