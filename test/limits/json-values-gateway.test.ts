/**
 * limits.maxJsonValues on a running gateway: a client frame of more values than the cap is
 * answered -32600 with `data: { maxJsonValues }`, id null, on every way in that parses client
 * frames (WebSocket, HTTP POST), and the connection goes on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { defaultLimits, resolveLimits } from '../../src/server/options.js';
import { Resources } from '../support/resources.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** An `echo` request whose params hold `objects` empty objects: objects + 5 values in all. */
function echoOf(objects: number, id: number): string {
  const params = Array<string>(objects).fill('{}').join(',');
  return `{"jsonrpc":"2.0","id":${id},"method":"echo","params":[${params}]}`;
}

const refusal = {
  jsonrpc: '2.0',
  id: null,
  error: {
    code: ErrorCode.InvalidRequest,
    message: 'Invalid Request',
    data: { maxJsonValues: defaultLimits.maxJsonValues },
  },
};

async function echoGateway() {
  const running = await res.gateway();
  running.gateway.method('echo', (params) => (params as unknown[]).length);
  return running;
}

describe('limits.maxJsonValues (default 10 000)', () => {
  it('WebSocket: exactly the default passes, one more is refused, and the connection goes on', async () => {
    const { url } = await echoGateway();
    const raw = await openRaw(res, url);
    const max = defaultLimits.maxJsonValues;

    raw.send(echoOf(max - 5, 101));
    expect(await raw.response(101)).toEqual({ jsonrpc: '2.0', result: max - 5, id: 101 });
    raw.send(echoOf(max - 4, 102));
    await raw.until(() => raw.frames.length === 2, 'the refusal');
    expect(raw.frames[1]).toEqual(refusal);
    expect((await raw.request('echo', [1])).result).toBe(1);
  });

  it('HTTP POST /rpc: the same refusal', async () => {
    const { httpUrl } = await echoGateway();
    const post = (body: string) =>
      fetch(`${httpUrl}/rpc`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      }).then(async (response) => (await response.json()) as unknown);
    const max = defaultLimits.maxJsonValues;
    expect(await post(echoOf(max - 5, 1))).toEqual({ jsonrpc: '2.0', result: max - 5, id: 1 });
    expect(await post(echoOf(max - 4, 2))).toEqual(refusal);
  });

  it('is an option of its own, checked with the others', () => {
    expect(resolveLimits({ maxJsonValues: 5 }).maxJsonValues).toBe(5);
    expect(() => resolveLimits({ maxJsonValues: 0 })).toThrow(
      'limits.maxJsonValues must be an integer at least 1, not 0',
    );
    expect(() => resolveLimits({ maxJsonValues: 1.5 })).toThrow(RangeError);
  });
});
