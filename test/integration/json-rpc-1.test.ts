/**
 * GatewayOptions.acceptV1, end to end over a real WebSocket: JSON-RPC 1.0 messages (no
 * `jsonrpc` member) are answered in 1.0's shape when it is on, and refused when it is off.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidParamsError } from '../../src/index.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

async function v1Gateway(acceptV1: boolean) {
  const running = await res.gateway({ acceptV1 });
  const notes: unknown[] = [];
  running.gateway.method('sum', (params) => {
    if (!Array.isArray(params)) throw new InvalidParamsError('positional numbers, please');
    return (params as number[]).reduce((a, b) => a + b, 0);
  });
  running.gateway.method('note', (params) => void notes.push(params));
  return { ...running, notes };
}

describe('JSON-RPC 1.0 (acceptV1)', () => {
  it('on: replies carry both result and error, one of them null, and no jsonrpc member', async () => {
    const { url } = await v1Gateway(true);
    const raw = await res.raw(url);
    raw.socket.send('{"method":"sum","params":[1,2],"id":1}');
    raw.socket.send('{"method":"sum","params":{"a":1},"id":"two"}');
    raw.socket.send('{"method":"missing","params":[],"id":3}');
    const frames = (await raw.waitFor(3)).map((f) => JSON.parse(f) as unknown);
    expect(frames).toEqual([
      { result: 3, error: null, id: 1 },
      {
        result: null,
        error: { code: -32602, message: 'positional numbers, please' },
        id: 'two',
      },
      { result: null, error: { code: -32601, message: 'Method not found' }, id: 3 },
    ]);
  });

  it('on: a request with id null is a notification: its handler runs and nothing is answered', async () => {
    const { url, notes } = await v1Gateway(true);
    const raw = await res.raw(url);
    raw.socket.send('{"method":"note","params":["hello"],"id":null}');
    raw.socket.send('{"method":"sum","params":[1,2],"id":null}');
    // A later request's reply is the first frame: nothing came before it.
    raw.socket.send('{"method":"sum","params":[2,2],"id":9}');
    expect(await raw.waitFor(1)).toEqual(['{"result":4,"error":null,"id":9}']);
    expect(notes).toEqual([['hello']]);
    // 2.0 messages on the same connection are still answered as 2.0.
    raw.socket.send('{"jsonrpc":"2.0","method":"sum","params":[3,3],"id":10}');
    expect((await raw.waitFor(2))[1]).toBe('{"jsonrpc":"2.0","result":6,"id":10}');
  });

  it('off (the default): a message without "jsonrpc" is -32600 Invalid Request, and runs nothing', async () => {
    const { url, notes } = await v1Gateway(false);
    const raw = await res.raw(url);
    raw.socket.send('{"method":"sum","params":[1,2],"id":1}');
    raw.socket.send('{"method":"note","params":["hello"],"id":null}');
    const frames = (await raw.waitFor(2)).map((f) => JSON.parse(f) as unknown);
    const invalid = { code: -32600, message: 'Invalid Request' };
    expect(frames).toEqual([
      { jsonrpc: '2.0', error: invalid, id: 1 },
      { jsonrpc: '2.0', error: invalid, id: null },
    ]);
    expect(notes).toEqual([]);
  });
});
