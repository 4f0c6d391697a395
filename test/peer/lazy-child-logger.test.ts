import { describe, expect, it } from 'vitest';
import { childLoggerOf } from '../../src/peer/lazy-child-logger.js';
import type { Logger } from '../../src/peer/logger.js';

/** A parent logger that records the children it makes and the lines they write. */
function recordingParent(enabled: readonly string[] | undefined) {
  const children: Record<string, unknown>[] = [];
  const lines: { level: string; bindings: Record<string, unknown>; msg?: string }[] = [];
  const make = (bindings: Record<string, unknown>): Logger => {
    const line = (level: string) => (_obj: unknown, msg?: string) => {
      lines.push({ level, bindings, msg });
    };
    return {
      trace: line('trace'),
      debug: line('debug'),
      info: line('info'),
      warn: line('warn'),
      error: line('error'),
      child: (more) => {
        children.push(more);
        return make({ ...bindings, ...more });
      },
    };
  };
  const parent = make({}) as Logger & { isLevelEnabled?: (level: string) => boolean };
  if (enabled) parent.isLevelEnabled = (level) => enabled.includes(level);
  return { parent, children, lines };
}

describe('childLoggerOf', () => {
  it('makes no child for lines below the parent level, and one child (with its binding) on the first line that passes', () => {
    const { parent, children, lines } = recordingParent(['warn', 'error']);
    const logger = childLoggerOf(parent, 'session', 's-1');
    logger.info({}, 'connected');
    logger.debug({}, 'detail');
    expect(children).toEqual([]);
    expect(lines).toEqual([]);

    logger.warn({}, 'slow');
    logger.error({}, 'failed');
    logger.info({}, 'after');
    expect(children).toEqual([{ session: 's-1' }]);
    expect(lines.map((l) => [l.level, l.msg, l.bindings])).toEqual([
      ['warn', 'slow', { session: 's-1' }],
      ['error', 'failed', { session: 's-1' }],
      // Once the child exists, it decides (pino's child has the parent's level).
      ['info', 'after', { session: 's-1' }],
    ]);
  });

  it('without isLevelEnabled it makes the child on the first line of any level', () => {
    const { parent, children, lines } = recordingParent(undefined);
    const logger = childLoggerOf(parent, 'session', 's-2');
    logger.trace({}, 'first');
    expect(children).toEqual([{ session: 's-2' }]);
    expect(lines).toEqual([{ level: 'trace', bindings: { session: 's-2' }, msg: 'first' }]);
  });

  it('child() binds on top of the session binding', () => {
    const { parent, lines } = recordingParent(['info']);
    childLoggerOf(parent, 'session', 's-3').child({ call: 7 }).info({}, 'x');
    expect(lines).toEqual([{ level: 'info', bindings: { session: 's-3', call: 7 }, msg: 'x' }]);
  });
});
