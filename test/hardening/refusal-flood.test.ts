/**
 * A peer's id-null refusals (-32600 naming a `maxDepth` or `maxJsonValues`) are matched to the
 * pending call whose frame passes that limit by measuring the frames sent. Each frame is measured
 * once (jsonShape, cached): a client sending such refusals over and over, naming limits nothing
 * passes, once made the gateway write every pending call's request again for each of them.
 * jsonShape counts as the inbound checks count (scanJson, exceedsDepth): against them, any JSON.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { exceedsDepth, jsonShape, scanJson } from '../../src/protocol/safe-json.js';
import { openRawSocket, startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';

describe('jsonShape', () => {
  it('says a text passes a limit exactly when the inbound checks do', () => {
    fc.assert(
      fc.property(fc.json({ depthSize: 'medium' }), fc.nat({ max: 40 }), (text, limit) => {
        const shape = jsonShape(text);
        expect(shape.values > limit).toBe(scanJson(text, Infinity, limit) === 'values');
        expect(shape.depth > limit).toBe(exceedsDepth(text, limit));
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('refusals naming no frame of ours', () => {
  let running: RunningGateway | undefined;
  afterEach(async () => {
    await running?.gateway.close({ timeoutMs: 0 });
    running = undefined;
  });

  it('measure each pending call once, however many come', async () => {
    running = await startGateway();
    const raw = await openRawSocket(running.url);
    const [session] = [...running.gateway.sessions.values()];
    let encodings = 0;
    const params = { toJSON: () => (encodings++, { n: 1 }) };
    const calls = Array.from({ length: 20 }, () =>
      session!.call('client.work', params as never, { timeoutMs: 0 }).catch((err: Error) => err),
    );
    await raw.waitFor(20);
    expect(encodings).toBe(20);
    const refusal = JSON.stringify({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32600, message: 'Invalid Request', data: { maxDepth: 1_000_000_000 } },
    });
    for (let i = 0; i < 50; i++) raw.socket.send(refusal);
    raw.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 'p', method: 'rpc.ping' }));
    await raw.waitFor(21);
    // Read in order: every refusal was weighed before the ping's answer. One measure each.
    expect(encodings).toBe(40);
    // None matched: the calls still wait, and are answered as usual.
    for (const frame of raw.frames.slice(0, 20)) {
      const { id } = JSON.parse(frame) as { id: number };
      raw.socket.send(JSON.stringify({ jsonrpc: '2.0', id, result: 'done' }));
    }
    expect(await Promise.all(calls)).toEqual(Array(20).fill('done'));
    raw.close();
  });
});
