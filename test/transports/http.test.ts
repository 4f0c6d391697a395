/**
 * JSON-RPC over HTTP POST on the gateway's own path: statuses, and the same hooks, limits and
 * metrics as the WebSocket.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { UpgradeRejection } from '../../src/index.js';
import { scrape, sampleValue } from '../support/metrics.js';
import { Resources } from '../support/resources.js';
import { deferred } from '../support/promises.js';

const res = new Resources();
afterEach(() => res.cleanup());

interface Answer {
  status: number;
  type: string | null;
  body: string;
  headers: Headers;
}

async function post(
  httpUrl: string,
  body: string,
  headers: Record<string, string> = { 'content-type': 'application/json' },
  path = '/rpc',
): Promise<Answer> {
  const response = await fetch(`${httpUrl}${path}`, { method: 'POST', headers, body });
  return {
    status: response.status,
    type: response.headers.get('content-type'),
    body: await response.text(),
    headers: response.headers,
  };
}

const json = (answer: Answer): unknown => JSON.parse(answer.body);

/** A browser's CORS preflight of a JSON POST to /rpc from a page on `origin`. */
function preflightFrom(httpUrl: string, origin: string): Promise<Response> {
  return fetch(`${httpUrl}/rpc`, {
    method: 'OPTIONS',
    headers: {
      origin,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'content-type',
    },
  });
}
describe('POST /rpc', () => {
  it('answers a request with 200 and the JSON-RPC response, errors included', async () => {
    const { httpUrl } = await res.demoGateway();
    const ok = await post(
      httpUrl,
      '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}',
    );
    expect(ok).toMatchObject({ status: 200, type: 'application/json; charset=utf-8' });
    expect(ok.body).toBe('{"jsonrpc":"2.0","result":19,"id":1}');

    const missing = await post(httpUrl, '{"jsonrpc": "2.0", "method": "foobar", "id": "1"}');
    expect(missing.status).toBe(200);
    expect(json(missing)).toEqual({
      jsonrpc: '2.0',
      error: { code: -32601, message: 'Method not found' },
      id: '1',
    });
    const unparsable = await post(httpUrl, '{"jsonrpc": "2.0", "method": "foobar, "params"');
    expect(unparsable.status).toBe(200);
    expect(json(unparsable)).toMatchObject({ error: { code: -32700 }, id: null });
  });

  it('answers a notification, and a batch of notifications only, with 204 and no body', async () => {
    const { httpUrl, gateway } = await res.gateway();
    const seen: unknown[] = [];
    gateway.method('note', (params) => void seen.push(params));
    const one = await post(httpUrl, '{"jsonrpc":"2.0","method":"note","params":[1]}');
    expect(one).toMatchObject({ status: 204, body: '', type: null });
    const both = await post(
      httpUrl,
      '[{"jsonrpc":"2.0","method":"note","params":[2]},{"jsonrpc":"2.0","method":"note","params":[3]}]',
    );
    expect(both).toMatchObject({ status: 204, body: '' });
    expect(seen).toEqual([[1], [2], [3]]);
  });

  it('answers a mixed batch with one array of the responses', async () => {
    const { httpUrl } = await res.demoGateway();
    const answer = await post(
      httpUrl,
      '[{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method":"notify_hello","params":[7]},{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":"2"}]',
    );
    expect(answer.status).toBe(200);
    expect(json(answer)).toEqual([
      { jsonrpc: '2.0', result: 7, id: '1' },
      { jsonrpc: '2.0', result: 19, id: '2' },
    ]);
  });

  it('refuses what is not JSON-RPC over HTTP with a status and a text saying why', async () => {
    const { httpUrl } = await res.demoGateway({ limits: { maxMessageBytes: 200 } });
    const call = '{"jsonrpc":"2.0","method":"sum","params":[1],"id":1}';
    const wrongType = await post(httpUrl, call, { 'content-type': 'text/plain' });
    expect(wrongType.status).toBe(415);
    expect(wrongType.body).toContain('Content-Type: application/json');
    // The other media types of the JSON-RPC over HTTP description are accepted.
    for (const type of [
      'application/json-rpc',
      'application/jsonrequest',
      'application/json; charset=utf-8',
    ]) {
      expect((await post(httpUrl, call, { 'content-type': type })).status).toBe(200);
    }
    const big = await post(
      httpUrl,
      JSON.stringify({ jsonrpc: '2.0', method: 'sum', params: new Array(100).fill(1), id: 1 }),
    );
    expect(big.status).toBe(413);
    expect(big.body).toContain('200 bytes');

    const put = await fetch(`${httpUrl}/rpc`, { method: 'PUT', body: call });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, POST, OPTIONS');
    await put.arrayBuffer();
    const get = await fetch(`${httpUrl}/rpc`);
    expect(get.status).toBe(426);
    expect(await get.text()).toContain('HTTP POST');
  });

  it('says subscriptions and server-to-client calls need a connection the server can push on (-32008)', async () => {
    const { httpUrl } = await res.demoGateway();
    const subscribe = await post(
      httpUrl,
      '{"jsonrpc":"2.0","method":"subscribe","params":["ticker"],"id":1}',
    );
    expect(subscribe.status).toBe(200);
    const error = (json(subscribe) as { error: { code: number; message: string } }).error;
    expect(error.code).toBe(-32008);
    expect(error.message).toMatch(/^Subscriptions need .*WebSocket.*not HTTP POST$/);

    // ask_client calls client.confirm on the caller: impossible over HTTP.
    const ask = await post(
      httpUrl,
      '{"jsonrpc":"2.0","method":"ask_client","params":["ok?"],"id":2}',
    );
    expect(json(ask)).toMatchObject({ error: { code: -32008 }, id: 2 });
    expect((json(ask) as { error: { message: string } }).error.message).toMatch(
      /^Server-to-client calls need/,
    );
  });

  it('runs the authenticate hook on the request: 401 without the token, the context reaches handlers with it', async () => {
    const seenTransports: string[] = [];
    const { httpUrl, gateway } = await res.gateway<{ user: string }>({
      authenticate: ({ headers, transport }) => {
        seenTransports.push(transport);
        if (headers.authorization !== 'Bearer s3cret')
          throw new UpgradeRejection(401, 'Token required', { 'www-authenticate': 'Bearer' });
        return { user: 'ada' };
      },
    });
    gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
    const call = '{"jsonrpc":"2.0","method":"whoami","id":1}';
    const refused = await post(httpUrl, call);
    expect(refused).toMatchObject({ status: 401, body: 'Token required\n' });
    expect(refused.headers.get('www-authenticate')).toBe('Bearer');
    const accepted = await post(httpUrl, call, {
      'content-type': 'application/json',
      authorization: 'Bearer s3cret',
    });
    expect(accepted.body).toBe('{"jsonrpc":"2.0","result":"ada","id":1}');
    expect(seenTransports).toEqual(['http', 'http']);
  });

  it('applies the authorize hook (-32004), the rate limit per address (-32003) and the origin list (403)', async () => {
    const { httpUrl, gateway } = await res.gateway({
      authorize: ({ method }) => method !== 'secret',
      limits: { ratePerSecond: 0.001, rateBurst: 3 },
      allowedOrigins: ['https://app.example'],
    });
    gateway.method('open', () => 'fine');
    gateway.method('secret', () => 'leaked');
    const denied = await post(httpUrl, '{"jsonrpc":"2.0","method":"secret","id":1}');
    expect(json(denied)).toMatchObject({ error: { code: -32004 }, id: 1 });

    // The burst of 3 is shared by every request from this address (one was spent above).
    const outcomes: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      const answer = await post(httpUrl, `{"jsonrpc":"2.0","method":"open","id":${i}}`);
      const body = json(answer) as { result?: string; error?: { code: number } };
      outcomes.push(body.result ?? body.error?.code);
    }
    expect(outcomes).toEqual(['fine', 'fine', -32003]);

    const foreign = await post(httpUrl, '{"jsonrpc":"2.0","method":"open","id":9}', {
      'content-type': 'application/json',
      origin: 'https://evil.example',
    });
    expect(foreign.status).toBe(403);
  });

  it('answers CORS preflights for origins on the allow-list only, and marks their responses', async () => {
    const { httpUrl } = await res.demoGateway({ allowedOrigins: ['https://app.example'] });
    const preflight = (origin: string) => preflightFrom(httpUrl, origin);
    const granted = await preflight('https://app.example');
    expect(granted.status).toBe(204);
    expect(granted.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(granted.headers.get('access-control-allow-methods')).toBe('POST');
    expect(granted.headers.get('access-control-allow-headers')).toBe('content-type');
    expect((await preflight('https://evil.example')).status).toBe(403);

    const call = await post(httpUrl, '{"jsonrpc":"2.0","method":"sum","params":[1,2],"id":1}', {
      'content-type': 'application/json',
      origin: 'https://app.example',
    });
    expect(call.body).toBe('{"jsonrpc":"2.0","result":3,"id":1}');
    expect(call.headers.get('access-control-allow-origin')).toBe('https://app.example');
    // Same-origin callers send no Origin and need no CORS header.
    const plain = await post(httpUrl, '{"jsonrpc":"2.0","method":"sum","params":[1,2],"id":1}');
    expect(plain.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('without an allow-list, a page on the same host at another port gets CORS (as its upgrade is let in); another host does not', async () => {
    const { httpUrl, port } = await res.demoGateway();
    const page = `http://127.0.0.1:${port + 1}`;
    const preflight = (origin: string) => preflightFrom(httpUrl, origin);
    const granted = await preflight(page);
    expect(granted.status).toBe(204);
    expect(granted.headers.get('access-control-allow-origin')).toBe(page);
    const call = await post(httpUrl, '{"jsonrpc":"2.0","method":"sum","params":[1,2],"id":1}', {
      'content-type': 'application/json',
      origin: page,
    });
    expect(call.body).toBe('{"jsonrpc":"2.0","result":3,"id":1}');
    expect(call.headers.get('access-control-allow-origin')).toBe(page);
    expect((await preflight('https://evil.example')).status).toBe(403);
    expect((await preflight(`http://localhost:${port}`)).status).toBe(403);
  });

  it('counts HTTP calls in the same metrics as WebSocket calls', async () => {
    const { httpUrl, url } = await res.demoGateway();
    await post(httpUrl, '{"jsonrpc":"2.0","method":"subtract","params":[2,1],"id":1}');
    await post(httpUrl, '{"jsonrpc":"2.0","method":"subtract","params":[2],"id":2}');
    const client = res.client(url);
    expect(await client.call('subtract', [5, 1])).toBe(4);
    const text = await scrape(httpUrl);
    expect(sampleValue(text, 'rpc_calls_total', { method: 'subtract', outcome: 'ok' })).toBe(2);
    expect(sampleValue(text, 'rpc_calls_total', { method: 'subtract', outcome: 'error' })).toBe(1);
  });

  for (const how of ['close', 'drain'] as const) {
    it(`lets an HTTP call already taken finish when the gateway is told to ${how}`, async () => {
      const { httpUrl, gateway } = await res.gateway();
      const started = deferred();
      const release = deferred();
      gateway.method('slow', async () => {
        started.resolve();
        await release.promise;
        return 'done';
      });
      const answer = post(httpUrl, '{"jsonrpc":"2.0","method":"slow","id":1}');
      await started.promise;
      const stopping =
        how === 'close'
          ? gateway.close({ timeoutMs: 10_000 })
          : gateway.drain({ deadlineMs: 10_000 });
      // New requests are refused meanwhile; the one in flight is not cut off.
      expect((await post(httpUrl, '{"jsonrpc":"2.0","method":"slow","id":2}')).status).toBe(503);
      release.resolve();
      const reply = await answer;
      expect(reply.status).toBe(200);
      expect(reply.body).toBe('{"jsonrpc":"2.0","result":"done","id":1}');
      await stopping;
    });
  }

  it("a notification's handler keeps its connection slot until it ends, after the 204", async () => {
    const { httpUrl, gateway } = await res.gateway({ limits: { maxConnections: 1 } });
    const release = deferred();
    const started = deferred();
    gateway.method('background', async () => {
      started.resolve();
      await release.promise;
    });
    gateway.method('ping', () => 'pong');
    const note = await post(httpUrl, '{"jsonrpc":"2.0","method":"background"}');
    expect(note.status).toBe(204);
    await started.promise;
    expect((await post(httpUrl, '{"jsonrpc":"2.0","method":"ping","id":1}')).status).toBe(503);
    release.resolve();
    // Once the handler is done the slot is free again.
    let answer: Answer | undefined;
    for (let i = 0; i < 200 && answer?.status !== 200; i++) {
      answer = await post(httpUrl, '{"jsonrpc":"2.0","method":"ping","id":2}');
      if (answer.status !== 200) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(answer?.body).toBe('{"jsonrpc":"2.0","result":"pong","id":2}');
  });

  it('aborts the handler of a caller that went away before its answer', async () => {
    const { httpUrl, gateway } = await res.gateway();
    const started = deferred();
    const aborted = deferred();
    gateway.method('long', async (_params, ctx) => {
      ctx.signal.addEventListener('abort', () => aborted.resolve());
      started.resolve();
      await aborted.promise;
      return 'never sent';
    });
    const controller = new AbortController();
    const call = fetch(`${httpUrl}/rpc`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"jsonrpc":"2.0","method":"long","id":1}',
      signal: controller.signal,
    }).catch((err: unknown) => err);
    await started.promise;
    controller.abort();
    await aborted.promise; // resolves only if the gateway aborted the handler
    expect(await call).toBeInstanceOf(Error);
  });

  it('refuses new requests with 503 once the gateway is draining', async () => {
    const { httpUrl, url, gateway } = await res.gateway();
    const release = deferred();
    const started = deferred();
    gateway.method('slow', async () => {
      started.resolve();
      await release.promise;
      return 'done';
    });
    // A WebSocket call in flight holds the drain open, with the HTTP listener still up.
    const client = res.client(url);
    const slow = client.call('slow');
    await started.promise;
    const draining = gateway.drain({ deadlineMs: 10_000 });
    const answer = await post(httpUrl, '{"jsonrpc":"2.0","method":"slow","id":1}');
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('1');
    release.resolve();
    expect(await slow).toBe('done');
    await draining;
  });
});
