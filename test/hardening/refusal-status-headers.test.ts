/**
 * A refusal is an error status with headers Node would send. `UpgradeRejection` refuses a status
 * outside 400-599 (RangeError naming it) and a header name or value Node's validateHeaderName /
 * validateHeaderValue refuse (TypeError): thrown from `authenticate`, either is a hook failure,
 * a plain 500, logged. A rejection altered after it was made is checked again where it is sent,
 * a plain 500 too, logged. The same on each HTTP transport: the upgrade (whose refusal the
 * gateway writes itself), POST /rpc and the event stream's opening GET. Read off the raw bytes
 * on the wire: nothing the hook gave reaches them unchecked.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { UpgradeRejection } from '../../src/index.js';
import { CaptureLogger } from '../support/logging.js';
import { Resources } from '../support/resources.js';
import { rawHttpExchange } from '../support/sockets.js';
import type { RawHttpAnswer } from '../support/sockets.js';

const resources = new Resources();
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await resources.cleanup();
});

describe('UpgradeRejection', () => {
  it.each([200, 101, 99, 1000, 399, 600, 401.5, Number.NaN])(
    'refuses status %s with a RangeError naming it',
    (status) => {
      expect(() => new UpgradeRejection(status)).toThrow(RangeError);
      expect(() => new UpgradeRejection(status)).toThrow(String(status));
    },
  );

  it('takes any 4xx or 5xx', () => {
    for (const status of [400, 401, 403, 429, 499, 500, 503, 599]) {
      expect(new UpgradeRejection(status).status).toBe(status);
    }
  });

  it('refuses header names and values Node would not send (TypeError)', () => {
    expect(() => new UpgradeRejection(401, 'no', { 'bad name': 'v' })).toThrow(TypeError);
    expect(
      () => new UpgradeRejection(401, 'no', { 'WWW-Authenticate': 'Bearer\r\nSet-Cookie: a=1' }),
    ).toThrow(TypeError);
    expect(() => new UpgradeRejection(401, 'no', { 'X-A': 'a\nb' })).toThrow(TypeError);
  });

  it('keeps a checked copy of its headers', () => {
    const given: Record<string, string> = { 'WWW-Authenticate': 'Bearer realm="api"' };
    const rejection = new UpgradeRejection(401, 'no', given);
    given['WWW-Authenticate'] = 'Bearer\r\nSet-Cookie: a=1';
    expect(rejection.headers).toEqual({ 'WWW-Authenticate': 'Bearer realm="api"' });
    expect(Object.isFrozen(rejection.headers)).toBe(true);
  });
});

/** Send `head` on a socket of its own; the answer up to the server's close (rawHttpExchange). */
function send(port: number, head: string): Promise<RawHttpAnswer> {
  return rawHttpExchange(port, head, (socket) => cleanups.push(() => socket.destroy()), 'latin1');
}

/** The three ways in, each naming the hook's case in X-Case. */
const REQUESTS: Record<string, (port: number, which: string) => string> = {
  upgrade: (port, which) =>
    [
      'GET /rpc HTTP/1.1',
      `Host: 127.0.0.1:${port}`,
      'Connection: Upgrade',
      'Upgrade: websocket',
      'Sec-WebSocket-Version: 13',
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
      `X-Case: ${which}`,
    ].join('\r\n'),
  'POST /rpc': (port, which) =>
    [
      'POST /rpc HTTP/1.1',
      `Host: 127.0.0.1:${port}`,
      'Content-Type: application/json',
      'Content-Length: 0',
      'Connection: close',
      `X-Case: ${which}`,
    ].join('\r\n'),
  'event stream': (port, which) =>
    [
      'GET /rpc/events HTTP/1.1',
      `Host: 127.0.0.1:${port}`,
      'Connection: close',
      `X-Case: ${which}`,
    ].join('\r\n'),
};

/** What the hook throws for each X-Case. */
function rejectionFor(which: string): unknown {
  switch (which) {
    case 'success-status':
      return new UpgradeRejection(200, 'fine?');
    case 'switching-status':
      return new UpgradeRejection(101);
    case 'out-of-range':
      return new UpgradeRejection(1000);
    case 'crlf-value':
      return new UpgradeRejection(401, 'no', { 'WWW-Authenticate': 'Bearer\r\nSet-Cookie: a=1' });
    case 'bad-name':
      return new UpgradeRejection(401, 'no', { 'bad name': 'v' });
    case 'altered-status': {
      const rejection = new UpgradeRejection(401, 'fine?');
      (rejection as { status: number }).status = 200;
      return rejection;
    }
    case 'altered-headers': {
      const rejection = new UpgradeRejection(401, 'no');
      (rejection as { headers: Record<string, string> }).headers = {
        'WWW-Authenticate': 'Bearer\r\nSet-Cookie: a=1',
      };
      return rejection;
    }
    default:
      return new UpgradeRejection(403, 'not you', { 'WWW-Authenticate': 'Bearer realm="api"' });
  }
}

async function refusingGateway() {
  const logger = new CaptureLogger();
  const running = await resources.gateway({
    logger,
    routes: { events: '/rpc/events' },
    authenticate: ({ headers }) => {
      throw rejectionFor(String(headers['x-case']));
    },
  });
  return { ...running, logger };
}

const UNSENDABLE = [
  'success-status',
  'switching-status',
  'out-of-range',
  'crlf-value',
  'bad-name',
  'altered-status',
  'altered-headers',
];

describe.each(Object.keys(REQUESTS))('a refusal on the %s', (transport) => {
  const request = REQUESTS[transport]!;

  it.each(UNSENDABLE)('is a plain 500 when the hook gives %s', async (which) => {
    const { port, logger } = await refusingGateway();
    const answer = await send(port, request(port, which));
    expect(answer.statusLine).toBe('HTTP/1.1 500 Internal Server Error');
    expect(answer.headers['set-cookie']).toBeUndefined();
    expect(answer.headers['www-authenticate']).toBeUndefined();
    expect(answer.headers['bad name']).toBeUndefined();
    expect(answer.body).not.toContain('fine?');
    // Logged: by runAuthenticate when the constructor refused it, where it is sent otherwise.
    const logged = logger.records.filter((record) => record.level === 'error');
    expect(logged.length).toBeGreaterThan(0);
  });

  it('goes out as given when it is an error status with headers Node would send', async () => {
    const { port } = await refusingGateway();
    const answer = await send(port, request(port, 'fine'));
    expect(answer.statusLine).toBe('HTTP/1.1 403 Forbidden');
    expect(answer.headers['www-authenticate']).toBe('Bearer realm="api"');
  });
});
