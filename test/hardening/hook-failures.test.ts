/**
 * Hooks that throw while a connection is being admitted: the connection is refused (500) and
 * its admission slot is given back, so a faulty hook cannot lock an address out.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { Resources } from '../support/resources.js';
import { CaptureLogger } from '../support/logging.js';
import { attemptUpgrade } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** Try an upgrade offering `protocol`: 'open', the HTTP status, or 'closed' (socket dropped). */
function upgradeOffering(url: string, protocol: string): Promise<number | 'open' | 'closed'> {
  const socket = res.track(new WebSocket(url, [protocol]));
  return new Promise((resolve) => {
    socket.on('error', () => undefined);
    socket.once('open', () => resolve('open'));
    socket.once('unexpected-response', (_req, response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
      socket.terminate();
    });
    socket.once('close', () => resolve('closed'));
  });
}

describe('hooks that throw during admission', () => {
  it('userOf: each upgrade gets 500, and the per-address slots are released', async () => {
    const logger = new CaptureLogger();
    const { url } = await res.gateway<{ user?: string }>({
      logger,
      limits: { maxConnectionsPerIp: 2 },
      authenticate: ({ query }) => ({ user: query.get('user') ?? undefined }),
      userOf: (context) => {
        if (context.user === 'bad') throw new Error('no such user');
        return context.user;
      },
    });
    for (let i = 0; i < 3; i++) expect(await attemptUpgrade(res, `${url}?user=bad`)).toBe(500);
    // Three refusals with a limit of two: a leak would answer 429 here.
    expect(await attemptUpgrade(res, `${url}?user=alice`)).toBe('open');
    expect(await attemptUpgrade(res, `${url}?user=bob`)).toBe('open');
    expect(logger.records.filter((r) => r.msg === 'userOf failed')).toHaveLength(3);
  });

  it('selectProtocol: each upgrade fails, and the per-address slots are released', async () => {
    const { url } = await res.gateway({
      limits: { maxConnectionsPerIp: 2 },
      selectProtocol: (offered) => {
        if (offered.includes('bad')) throw new Error('cannot choose');
        return offered[0] ?? false;
      },
    });
    for (let i = 0; i < 3; i++) expect(await upgradeOffering(url, 'bad')).not.toBe('open');
    expect(await attemptUpgrade(res, url)).toBe('open');
    expect(await attemptUpgrade(res, url)).toBe('open');
  });
});
