// A notification to an HTTP upstream is taken by any 2xx answer: its body is read to the end
// (the socket goes back to the pool), not kept, and what becomes of it after the status (a body
// past maxReplyBytes, declared or streamed; a reset mid-body; the attempt's timeout while the
// body is awaited) does not fail the notification; its slot is freed once the socket is let go
// (read to the end, or given up past maxReplyBytes or the timeout). A call's reply is bounded
// too, and a notification answered with another status still fails.
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UpstreamError } from '../../src/upstream/index.js';
import { waitFor } from '../support/waiting.js';
import type { JsonRpcHttpClient } from '../../src/upstream/index.js';
import { startScriptedUpstream } from './scripted-upstream.js';
import type { ScriptedUpstream } from './scripted-upstream.js';

const MAX_REPLY_BYTES = 64 * 1024;
const big = 'x'.repeat(4 * MAX_REPLY_BYTES);

/** How the upstream answers each method. */
const answers: Record<string, (res: ServerResponse) => void> = {
  streamedBig: (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    for (let i = 0; i < 4; i++) res.write(big.slice(0, MAX_REPLY_BYTES));
    res.end();
  },
  declaredBig: (res) => {
    res.writeHead(200, { 'content-length': String(big.length) });
    res.end(big);
  },
  resetMidBody: (res) => {
    res.writeHead(200, { 'content-length': String(big.length) });
    res.write(big.slice(0, 1024), () => res.socket?.destroy());
  },
  status500: (res) => res.writeHead(500).end('no'),
  // The status at once, the body never: the attempt's timeout ends it.
  bodyNever: (res) => {
    res.writeHead(200, { 'content-length': '2' });
    res.flushHeaders();
  },
};

let upstream: ScriptedUpstream;
let client: JsonRpcHttpClient;

beforeAll(async () => {
  upstream = await startScriptedUpstream('notified', ({ method }, res) => answers[method]!(res), {
    maxReplyBytes: MAX_REPLY_BYTES,
    connections: 2,
  });
  client = upstream.client;
});

afterAll(async () => {
  await upstream?.close();
});

const options = { timeoutMs: 60_000 };

describe('a notification to an HTTP upstream', () => {
  it.each(['streamedBig', 'declaredBig', 'resetMidBody'])(
    'answered 2xx (%s): taken',
    async (method) => {
      await expect(client.notify(method, [], options)).resolves.toBeUndefined();
      await waitFor(() => client.inFlight === 0, 'the socket to be let go, and the slot with it');
    },
  );

  it('answered 2xx and its body not sent within the timeout: taken, not failed (nor sent again)', async () => {
    await expect(client.notify('bodyNever', [], { timeoutMs: 300 })).resolves.toBeUndefined();
    await waitFor(() => client.inFlight === 0, 'the socket to be given up at the timeout');
  });

  it('answered 500: -32011 with the status', async () => {
    const failure = await client.notify('status500', [], options).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(UpstreamError);
    expect(failure).toMatchObject({ code: -32011, reason: 'status 500' });
  });

  it("a call's reply past maxReplyBytes still fails: -32011 reply too large", async () => {
    for (const method of ['streamedBig', 'declaredBig']) {
      const failure = await client.call(method, [], options).catch((err: unknown) => err);
      expect(failure).toMatchObject({ code: -32011, reason: 'reply too large' });
    }
  });
});
