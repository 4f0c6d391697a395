import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { REDACTED_PATHS, UpgradeRejection, createLogger } from '../../src/index.js';
import type { UpgradeRequest } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { upgradeRefusal } from '../support/sockets.js';
import { waitUntil } from '../support/waiting.js';
import { CaptureLogger } from '../support/logging.js';
import { openSocket } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

/**
 * The real createLogger (pino with REDACTED_PATHS), with every serialized line
 * captured by pino's `streamWrite` hook just before it would reach stdout;
 * nothing is written out.
 */
function capturedPino(): { logger: ReturnType<typeof createLogger>; lines: string[] } {
  const lines: string[] = [];
  const logger = createLogger({
    level: 'info',
    hooks: {
      streamWrite: (line) => {
        lines.push(line);
        return '';
      },
    },
  });
  return { logger, lines };
}

describe('credential redaction in logs', () => {
  it('createLogger blanks tokens, authorization, cookies, the subprotocol header and query.token', () => {
    const { logger, lines } = capturedPino();
    logger.info(
      {
        token: 'SECRET-top-token',
        password: 'SECRET-password',
        headers: {
          host: 'gw.example.com',
          authorization: 'Bearer SECRET-bearer',
          cookie: 'sid=SECRET-cookie-header',
          'sec-websocket-protocol': 'jsonrpc-2.0, token.SECRET-protocol',
        },
        query: { token: 'SECRET-query', room: 'lobby' },
        cookies: { sid: 'SECRET-cookies' },
      },
      'upgrade',
    );
    logger.child({ session: 's1' }).warn(
      {
        req: { headers: { authorization: 'SECRET-req-auth', cookie: 'SECRET-req-cookie' } },
        user: { token: 'SECRET-nested-token', name: 'alice' },
      },
      'child line',
    );

    expect(lines).toHaveLength(2);
    const output = lines.join('');
    expect(output.match(/SECRET[-\w]*/g) ?? []).toEqual([]);
    const [first, second] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(first).toMatchObject({
      msg: 'upgrade',
      token: '[redacted]',
      password: '[redacted]',
      headers: {
        host: 'gw.example.com',
        authorization: '[redacted]',
        cookie: '[redacted]',
        'sec-websocket-protocol': '[redacted]',
      },
      query: { token: '[redacted]', room: 'lobby' },
      cookies: '[redacted]',
    });
    expect(second).toMatchObject({
      msg: 'child line',
      session: 's1',
      req: { headers: { authorization: '[redacted]', cookie: '[redacted]' } },
      user: { token: '[redacted]', name: 'alice' },
    });
    expect(REDACTED_PATHS).toContain('query.token');
  });

  it('the gateway never logs a token from the query string, headers or subprotocols (every object logged)', async () => {
    const logger = new CaptureLogger();
    const { url, gateway } = await res.gateway({
      logger,
      allowedOrigins: ['https://app.example'],
      limits: { maxConnections: 1 },
      authenticate: ({ query, protocols }: UpgradeRequest) => {
        const token = query.get('token') ?? protocols.find((p) => p.startsWith('token.'));
        if (token === 'token.GOOD-not-secret') return 'ok';
        throw new UpgradeRejection(401, 'Bad token');
      },
    });
    gateway.method('echo', (params) => params);
    const headers = {
      authorization: 'Bearer SECRET-header',
      cookie: 'token=SECRET-cookie',
    };

    const refused = await upgradeRefusal(res, `${url}?token=SECRET-query`, undefined, headers);
    expect(refused.status).toBe(401);
    expect(refused.body).not.toContain('SECRET');
    const rejected = logger.withMessage('upgrade rejected');
    expect(rejected).toHaveLength(1);
    expect(rejected[0]!.obj).toEqual({
      status: 401,
      reason: 'unauthenticated',
      remoteAddress: '127.0.0.1',
    });

    // Refused by subprotocol token, by origin, and (once full) by capacity.
    await upgradeRefusal(res, url, ['jsonrpc-2.0', 'token.SECRET-protocol'], headers);
    await upgradeRefusal(res, `${url}?token=SECRET-query2`, undefined, {
      ...headers,
      origin: 'https://evil.example',
    });
    const accepted = await openSocket(res, url, ['jsonrpc-2.0', 'token.GOOD-not-secret'], {
      headers,
    });
    await upgradeRefusal(res, `${url}?token=SECRET-query3`, undefined, headers);
    expect(
      logger.withMessage('upgrade rejected').map((r) => (r.obj as { reason: string }).reason),
    ).toEqual(['unauthenticated', 'unauthenticated', 'origin', 'capacity']);

    // A session's own lines (connected, disconnected) carry no credentials either.
    accepted.close();
    await waitUntil(() => logger.withMessage('disconnected').length === 1, 'the disconnect log');
    expect(logger.withMessage('connected')).toHaveLength(1);
    expect(logger.text()).not.toContain('SECRET');
    expect(logger.text()).not.toContain('GOOD-not-secret');
  });

  it('with the default pino logger, the lines of a rejected upgrade carry no token', async () => {
    const { logger, lines } = capturedPino();
    const { url } = await res.gateway({
      logger,
      authenticate: () => {
        throw new UpgradeRejection(403, 'Forbidden');
      },
    });
    await upgradeRefusal(res, `${url}?token=SECRET-query&access_token=SECRET-access`, undefined, {
      cookie: 'token=SECRET-cookie',
    });
    const rejected = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'upgrade rejected');
    expect(rejected).toHaveLength(1);
    expect(rejected[0]).toMatchObject({ status: 403, reason: 'unauthenticated' });
    expect(lines.join('')).not.toContain('SECRET');
  });

  it('a token offered as the only subprotocol does not reach the logs', async () => {
    // BUG: with no "jsonrpc-2.0" offered the default selectProtocol answers the first
    // offered subprotocol (the token), and Gateway.openSession logs it as `protocol`
    // in the 'connected' line: a key REDACTED_PATHS does not cover.
    const { logger, lines } = capturedPino();
    const { url } = await res.gateway({
      logger,
      authenticate: ({ protocols }) => {
        if (protocols[0] !== 'token.SECRET-only') throw new UpgradeRejection(401);
        return 'ok';
      },
    });
    const socket = await openSocket(res, url, ['token.SECRET-only']);
    expect(socket.readyState).toBe(WebSocket.OPEN);
    await waitUntil(() => lines.some((l) => l.includes('"connected"')), 'the connected line');
    expect(lines.join('')).not.toContain('SECRET-only');
  });
  it('createLogger blanks credentials at any depth and in URLs, and takes a hook’s url and query without throwing', () => {
    const { logger, lines } = capturedPino();
    const logged = {
      url: new URL('https://u:SECRET-userinfo@gw.example/rpc?token=SECRET-url&room=a'),
      query: new URLSearchParams('access_token=SECRET-params&room=b'),
      request: {
        headers: {
          host: 'gw.example',
          Authorization: 'Bearer SECRET-deep',
          cookie: 'sid=SECRET-deep-cookie',
          'sec-websocket-protocol': 'jsonrpc-2.0, bearer.SECRET-deep-protocol',
        },
      },
      call: { params: { token: 'SECRET-params-token', amount: 3 } },
      path: '/rpc?room=c&token=SECRET-path',
      protocols: ['jsonrpc-2.0', 'bearer.SECRET-protocols'],
      list: [{ session: { password: 'SECRET-in-array' } }],
    };
    const before = JSON.stringify(logged);
    logger.info(logged, 'hook');
    logger
      .child({ session: 's1' })
      .child({ request: { headers: { authorization: 'Bearer SECRET-binding' } } })
      .info('child');
    // The caller's object is as it was: what changed was copied.
    expect(JSON.stringify(logged)).toBe(before);
    expect(lines).toHaveLength(2);
    expect(lines.join('').match(/SECRET[-\w]*/g) ?? []).toEqual([]);
    expect(JSON.parse(lines[1]!)).toMatchObject({
      msg: 'child',
      session: 's1',
      request: { headers: { authorization: '[redacted]' } },
    });
    expect(JSON.parse(lines[0]!)).toMatchObject({
      url: 'https://u:redacted@gw.example/rpc?token=%5Bredacted%5D&room=a',
      query: { access_token: '[redacted]', room: 'b' },
      request: { headers: { host: 'gw.example', Authorization: '[redacted]' } },
      call: { params: { token: '[redacted]', amount: 3 } },
      path: '/rpc?room=c&token=[redacted]',
      protocols: '[redacted]',
      list: [{ session: { password: '[redacted]' } }],
    });
  });

  it('an authenticate hook and a handler that log the upgrade’s url and query with the default logger', async () => {
    const { logger, lines } = capturedPino();
    const { url, gateway } = await res.gateway({
      logger,
      authenticate: (request: UpgradeRequest) => {
        logger.info({ url: request.url, query: request.query }, 'hook saw');
        return { url: request.url };
      },
    });
    gateway.method('where', (_params, ctx) => {
      const { url: seen } = ctx.session.context as { url: URL };
      ctx.session.logger.info({ url: seen }, 'handler saw');
      return seen.pathname;
    });
    const client = res.client(`${url}?token=SECRET-query`);
    expect(await client.call('where')).toBe('/rpc');
    expect(lines.filter((l) => /"(hook|handler) saw"/.test(l))).toHaveLength(2);
    expect(lines.join('')).not.toContain('SECRET');
  });
});
