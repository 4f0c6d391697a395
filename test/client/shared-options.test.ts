/**
 * createSharedClient's options: refused in the tab, naming the option, before anything is
 * posted to a worker; and docs/options.md lists exactly the options it, and the worker script's
 * host, have beyond createClient's.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { hostOnlyRules } from '../../src/client/shared/host.js';
import { createSharedClient } from '../../src/client/shared/index.js';
import { sharedOnlyRules } from '../../src/client/shared/options.js';

const url = 'ws://127.0.0.1:1/rpc';

/** The options a docs/options.md section's table rows name, sorted. */
function documented(section: string): string[] {
  const doc = readFileSync(new URL('../../docs/options.md', import.meta.url), 'utf8');
  const start = doc.indexOf(`## ${section}\n`);
  expect(start, `docs/options.md has a "## ${section}" section`).toBeGreaterThanOrEqual(0);
  const end = doc.indexOf('\n## ', start + 1);
  const text = doc.slice(start, end < 0 ? undefined : end);
  return [...text.matchAll(/^\| `([^`]+)` +\|/gm)].map((m) => m[1]!).sort();
}
const worker = () => ({ port: new MessageChannel().port1 });

describe('createSharedClient options', () => {
  it.each([
    [
      { url, worker, wokerUrl: '/w.js' },
      TypeError,
      'wokerUrl is not an option of createSharedClient (did you mean workerUrl?)',
    ],
    [{ url }, TypeError, 'workerUrl must be given (or worker)'],
    [{ url, workerUrl: 42 }, TypeError, 'workerUrl must be a URL string, not 42'],
    [
      { url: () => url, worker },
      TypeError,
      'url must be a URL or a non-empty array of URLs (a function cannot reach the worker)',
    ],
    [{ url: [], worker }, TypeError, 'url must be a URL or a non-empty array'],
    [{ url: 'not a url', worker }, RangeError, 'url must be a URL such as'],
    [
      { url, worker, protocols: () => 'p' },
      TypeError,
      'protocols must be a string or an array of strings, not a function',
    ],
    [
      { url, worker, WebSocket: class {} },
      TypeError,
      'WebSocket is not an option of createSharedClient',
    ],
    [
      { url, worker, middleware: [] },
      TypeError,
      'middleware is not an option of createSharedClient',
    ],
    [
      { url, worker, reconnect: { factor: 0 } },
      RangeError,
      'reconnect.factor must be a number at least 1, not 0',
    ],
    [
      { url, worker, reconnect: { delay: 1 } },
      TypeError,
      'reconnect.delay is not an option of reconnect',
    ],
    [{ url, worker, heartbeat: { intervalMs: 0 } }, RangeError, 'heartbeat.intervalMs must be'],
    [
      { url, worker, subscriptionMethods: { subscribe: 1 } },
      TypeError,
      'subscriptionMethods.subscribe must be a string',
    ],
    [{ url, worker, fallback: 'never' }, RangeError, 'fallback must be "per-tab" or "throw"'],
    [
      { url, worker, tabHeartbeatMs: 0 },
      RangeError,
      'tabHeartbeatMs must be an integer from 1 to 2147483647, not 0',
    ],
    [{ url, worker, name: 7 }, TypeError, 'name must be a string, not 7'],
    [{ url, worker: 'w.js' }, TypeError, 'worker must be a function'],
    [{ url, worker, getToken: 'token' }, TypeError, 'getToken must be a function'],
    [{ url, worker, maxQueued: -1 }, RangeError, 'maxQueued must be an integer at least 0, not -1'],
  ])('%j is refused', (options, type, message) => {
    const make = () => createSharedClient(options as never);
    expect(make).toThrow(type);
    expect(make).toThrow(message);
  });

  it('throws what made the worker fail with fallback "throw"', () => {
    const failing = () => {
      throw new Error('no SharedWorker for you');
    };
    expect(() => createSharedClient({ url, worker: failing, fallback: 'throw' })).toThrow(
      'no SharedWorker for you',
    );
  });

  it('docs/options.md lists the options createSharedClient has beyond createClient’s, and no other', () => {
    expect(documented('createSharedClient')).toEqual(Object.keys(sharedOnlyRules).sort());
  });

  it('docs/options.md lists the options the worker script’s host has beyond createClient’s, and no other', () => {
    expect(documented('shareClient and createClientHost')).toEqual(
      Object.keys(hostOnlyRules).sort(),
    );
  });
});
