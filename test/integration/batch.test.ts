import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { MethodNotFoundError, InvalidParamsError } from '../../src/index.js';
import { Resources } from '../support/resources.js';
import { deferred } from '../support/promises.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('batches', () => {
  it('client.batch sends calls and notifications in one frame and settles each in order', async () => {
    const { url, gateway } = await res.demoGateway();
    const frames: string[] = [];
    const sessionPromise = firstValueFrom(gateway.connected$);
    const client = res.client(url);
    const session = await sessionPromise;
    // Count the frames the server receives on this session: the batch must be one of them.
    const socketFrames = new Promise<void>((resolve) => {
      const peer = session.peer as unknown as { receive(text: string): void };
      const original = peer.receive.bind(peer);
      peer.receive = (text: string) => {
        frames.push(text);
        original(text);
        resolve();
      };
    });
    const hello = firstValueFrom(client.notificationsOf<[number]>('hello'));

    const results = await client.batch([
      { method: 'sum', params: [1, 2, 4] },
      { method: 'notify_hello', params: [7], notification: true },
      { method: 'subtract', params: [42, 23] },
      { method: 'foo.get', params: { name: 'myself' } },
      { method: 'get_data' },
      { method: 'sum', params: ['x'] },
    ]);
    await socketFrames;

    expect(frames).toHaveLength(1);
    expect(Array.isArray(JSON.parse(frames[0]!))).toBe(true);
    expect(results.map((r) => r.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'fulfilled',
      'rejected',
      'fulfilled',
      'rejected',
    ]);
    expect(results[0]).toEqual({ status: 'fulfilled', value: 7 });
    expect(results[1]).toEqual({ status: 'fulfilled', value: undefined });
    expect(results[2]).toEqual({ status: 'fulfilled', value: 19 });
    expect((results[3] as PromiseRejectedResult).reason).toBeInstanceOf(MethodNotFoundError);
    expect(results[4]).toEqual({ status: 'fulfilled', value: ['hello', 5] });
    expect((results[5] as PromiseRejectedResult).reason).toBeInstanceOf(InvalidParamsError);
    expect(await hello).toEqual([7]);
  });

  it('batch members run concurrently and the reply waits for the slowest', async () => {
    const { url, gateway } = await res.demoGateway();
    const release = deferred();
    const slowStarted = deferred();
    gateway.method('slow', async () => {
      slowStarted.resolve();
      await release.promise;
      return 'slow';
    });
    const fastRan = deferred();
    gateway.method('fast', () => {
      fastRan.resolve();
      return 'fast';
    });
    const client = res.client(url);
    const batch = client.batch([{ method: 'slow' }, { method: 'fast' }]);
    await slowStarted.promise;
    await fastRan.promise;
    release.resolve();
    expect(await batch).toEqual([
      { status: 'fulfilled', value: 'slow' },
      { status: 'fulfilled', value: 'fast' },
    ]);
  });

  it('answers a raw batch frame with one array (the specification example)', async () => {
    const { url } = await res.demoGateway();
    const raw = await res.raw(url);
    raw.socket.send(
      JSON.stringify([
        { jsonrpc: '2.0', method: 'sum', params: [1, 2, 4], id: '1' },
        { jsonrpc: '2.0', method: 'notify_hello', params: [7] },
        { jsonrpc: '2.0', method: 'subtract', params: [42, 23], id: '2' },
        { foo: 'boo' },
        { jsonrpc: '2.0', method: 'foo.get', params: { name: 'myself' }, id: '5' },
        { jsonrpc: '2.0', method: 'get_data', id: '9' },
      ]),
    );
    const frames = (await raw.waitFor(2)).map((f) => JSON.parse(f) as unknown);
    // notify_hello sends its `hello` notification while the batch is being handled.
    expect(frames[0]).toEqual({ jsonrpc: '2.0', method: 'hello', params: [7] });
    expect(frames[1]).toEqual([
      { jsonrpc: '2.0', result: 7, id: '1' },
      { jsonrpc: '2.0', result: 19, id: '2' },
      { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid Request' }, id: null },
      { jsonrpc: '2.0', error: { code: -32601, message: 'Method not found' }, id: '5' },
      { jsonrpc: '2.0', result: ['hello', 5], id: '9' },
    ]);
  });

  it('answers invalid batches as the specification says', async () => {
    const { url } = await res.demoGateway();
    const raw = await res.raw(url);

    raw.socket.send('[]');
    raw.socket.send('[1,2,3]');
    raw.socket.send(
      '[{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method"',
    );
    const frames = (await raw.waitFor(3)).map((f) => JSON.parse(f) as unknown);

    expect(frames[0]).toEqual({
      jsonrpc: '2.0',
      error: { code: -32600, message: 'Invalid Request' },
      id: null,
    });
    const invalid = {
      jsonrpc: '2.0',
      error: { code: -32600, message: 'Invalid Request' },
      id: null,
    };
    expect(frames[1]).toEqual([invalid, invalid, invalid]);
    expect(frames[2]).toEqual({
      jsonrpc: '2.0',
      error: { code: -32700, message: 'Parse error' },
      id: null,
    });
  });

  it('sends nothing back for a batch of notifications only', async () => {
    const { url, gateway } = await res.demoGateway();
    const updates: unknown[] = [];
    gateway.method('record', (params) => {
      updates.push(params);
    });
    const raw = await res.raw(url);
    raw.socket.send(
      JSON.stringify([
        { jsonrpc: '2.0', method: 'record', params: [1] },
        { jsonrpc: '2.0', method: 'update', params: [1, 2, 3] },
      ]),
    );
    raw.socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'sum', params: [2, 2], id: 10 }));
    // Frames are answered in order, so the first frame back must be the sum's answer.
    const [first] = await raw.waitFor(1);
    expect(JSON.parse(first!)).toEqual({ jsonrpc: '2.0', result: 4, id: 10 });
    expect(updates).toEqual([[1]]);
  });
});
