/**
 * A per-subscriber stream (gateway.stream) whose Observable emits a value nested deeper than
 * MAX_ENCODED_DEPTH: the stream ends with an error on that subscription alone, as publish refuses
 * such data, and the connection and its other streams and calls go on (over MessagePack and CBOR,
 * whose encoders cannot write it, and over JSON alike).
 */
import { Subject, firstValueFrom, toArray } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import type { WireCodec } from '../../src/encoding/codec.js';
import { MAX_ENCODED_DEPTH } from '../../src/encoding/encoded-depth.js';
import { msgpack } from '../../src/msgpack.js';
import { JsonRpcError } from '../../src/protocol/errors.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { Resources } from '../support/resources.js';

const resources = new Resources();
afterEach(() => resources.cleanup());

/** `0` inside `levels` arrays. */
function nested(levels: number): unknown {
  let value: unknown = 0;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

describe.each([
  ['json', 'json' as const],
  ['msgpack', msgpack],
  ['cbor', cbor],
])('%s', (_name, encoding: 'json' | WireCodec) => {
  it('a stream value too deep ends that stream with -32603; the connection and other streams go on', async () => {
    const { gateway, url } = await resources.gateway({ encodings: ['json', 'msgpack', 'cbor'] });
    const deep = new Subject<unknown>();
    const other = new Subject<number>();
    gateway.stream('deep', () => deep);
    gateway.stream('other', () => other);
    gateway.method('echo', (params) => params);
    const client = resources.client(url, { encoding });
    await client.opened();

    const seen: unknown[] = [];
    const ended = new Promise<unknown>((resolve, reject) => {
      client.subscribe('deep').subscribe({
        next: (value) => seen.push(value),
        error: resolve,
        complete: () => reject(new Error('completed instead of failing')),
      });
    });
    const others = firstValueFrom(client.subscribe<number>('other').pipe(toArray()));
    // Both subscribed (each reply sent) before anything is emitted.
    await client.call('echo', [0]);
    await client.call('echo', [0]);

    deep.next(nested(MAX_ENCODED_DEPTH));
    deep.next(nested(MAX_ENCODED_DEPTH + 1));
    const failure = await ended;
    expect(failure).toBeInstanceOf(JsonRpcError);
    expect(failure).toMatchObject({ code: ErrorCode.InternalError });
    expect(seen).toEqual([nested(MAX_ENCODED_DEPTH)]);
    expect(deep.observed).toBe(false);

    other.next(1);
    other.next(2);
    other.complete();
    expect(await others).toEqual([1, 2]);
    expect(await client.call('echo', [7])).toEqual([7]);
    expect(client.state).toBe('open');
  });
});
