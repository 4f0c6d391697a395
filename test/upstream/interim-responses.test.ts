// Interim (1xx) responses from an HTTP upstream before its answer. 102 Processing and 103 Early
// Hints are skipped and the answer read; a 100 Continue (the gateway never sends
// `Expect: 100-continue`) makes undici's HTTP/1.1 parser destroy the socket, so that call fails
// -32011 "connection failed" and the calls after it are answered as ever.
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UpstreamError } from '../../src/upstream/index.js';
import type { JsonRpcHttpClient } from '../../src/upstream/index.js';
import { startScriptedUpstream } from './scripted-upstream.js';
import type { ScriptedUpstream } from './scripted-upstream.js';

/** Before its answer, each method's interim response. */
const interim: Record<string, (res: ServerResponse) => void> = {
  processing: (res) => res.writeProcessing(),
  hints: (res) => res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' }),
  continue: (res) => res.writeContinue(),
  plain: () => undefined,
};

let upstream: ScriptedUpstream;
let client: JsonRpcHttpClient;

beforeAll(async () => {
  upstream = await startScriptedUpstream(
    'interim',
    ({ id, method }, res) => {
      interim[method]!(res);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id, result: method }));
    },
    { maxReplyBytes: 64 * 1024 },
  );
  client = upstream.client;
});

afterAll(async () => {
  await upstream?.close();
});

const call = (method: string) => client.call(method, undefined, { timeoutMs: 60_000 });

describe('interim responses before the answer', () => {
  it.each(['processing', 'hints'])('%s: skipped, the answer read', async (method) => {
    expect(await call(method)).toBe(method);
  });

  it('100 Continue: -32011 "connection failed" (undici refuses it), the next call answered', async () => {
    const failure = await call('continue').catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(UpstreamError);
    expect(failure).toMatchObject({ code: -32011, reason: 'connection failed', unsent: false });
    expect((failure as UpstreamError).detail).toContain('bad response');
    expect(await call('plain')).toBe('plain');
    expect(client.inFlight).toBe(0);
  });
});
