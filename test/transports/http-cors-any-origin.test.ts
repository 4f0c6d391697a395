/**
 * `allowedOrigins: ['*']` grants every page CORS, a hostile one and `Origin: null` included, so
 * it grants none credentials: without Access-Control-Allow-Credentials a browser hides from the
 * page the answer to a request that carried the user's cookies. Origins the gateway names (a
 * list, a predicate, the same-host default) keep it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { GatewayOptions } from '../../src/server/options.js';
import { Resources } from '../support/resources.js';
import { exchange } from '../sse/sse-raw.js';

const res = new Resources();
afterEach(() => res.cleanup());

const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });

async function gatewayWith(allowedOrigins: GatewayOptions<unknown>['allowedOrigins']) {
  const running = await res.gateway({ allowedOrigins });
  running.gateway.method('ping', () => 'pong');
  return running;
}

/** A cross-origin POST and a preflight from `origin`: the CORS headers each got. */
async function corsOf(httpUrl: string, origin: string) {
  const post = await exchange(
    `${httpUrl}/rpc`,
    'POST',
    { origin, 'content-type': 'application/json', cookie: 'sid=the-user' },
    BODY,
  );
  const preflight = await exchange(`${httpUrl}/rpc`, 'OPTIONS', {
    origin,
    'access-control-request-method': 'POST',
    'access-control-request-headers': 'content-type',
  });
  const granted = (headers: Record<string, unknown>) => ({
    origin: headers['access-control-allow-origin'],
    credentials: headers['access-control-allow-credentials'],
  });
  return {
    post: { status: post.status, ...granted(post.headers) },
    preflight: { status: preflight.status, ...granted(preflight.headers) },
  };
}

describe('CORS credentials on POST /rpc', () => {
  it('["*"]: every origin, null included, is granted its answers without credentials', async () => {
    const { httpUrl } = await gatewayWith(['*']);
    for (const origin of ['https://evil.example', 'null', 'http://localhost:5173']) {
      expect(await corsOf(httpUrl, origin), origin).toEqual({
        post: { status: 200, origin, credentials: undefined },
        preflight: { status: 204, origin, credentials: undefined },
      });
    }
  });

  it('a listed origin, one a predicate allows, and one on the same host keep credentials', async () => {
    const page = 'https://app.example';
    for (const allowedOrigins of [[page], (origin: string) => origin === page]) {
      const { httpUrl } = await gatewayWith(allowedOrigins);
      expect(await corsOf(httpUrl, page)).toEqual({
        post: { status: 200, origin: page, credentials: 'true' },
        preflight: { status: 204, origin: page, credentials: 'true' },
      });
    }
    const { httpUrl } = await gatewayWith(undefined);
    const sameHost = 'http://127.0.0.1:5173';
    expect(await corsOf(httpUrl, sameHost)).toEqual({
      post: { status: 200, origin: sameHost, credentials: 'true' },
      preflight: { status: 204, origin: sameHost, credentials: 'true' },
    });
  });
});
