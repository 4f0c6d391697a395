/**
 * A connection closing makes the error its running calls are aborted with only when it has
 * some: an Error's stack costs microseconds, and a gateway closes connections by the thousand,
 * most with no call running. One error serves every running call of a close, and one every
 * pending call.
 */
import { describe, expect, it, vi } from 'vitest';
import { ConnectionClosedError } from '../../src/protocol/local-errors.js';
import type * as LocalErrorsModule from '../../src/protocol/local-errors.js';
import { createPeerPair, createRawPeer, settle } from '../support/peers.js';

type LocalErrors = typeof LocalErrorsModule;

const made = vi.hoisted(() => ({ count: 0 }));

vi.mock('../../src/protocol/local-errors.js', async (importOriginal) => {
  const original = await importOriginal<LocalErrors>();
  class CountedConnectionClosedError extends original.ConnectionClosedError {
    constructor(...args: ConstructorParameters<typeof original.ConnectionClosedError>) {
      super(...args);
      made.count++;
    }
  }
  return { ...original, ConnectionClosedError: CountedConnectionClosedError };
});

describe('closing a peer', () => {
  it('makes no error when no call is running', async () => {
    // A server's peer: it answered a call, and never called out.
    const raw = createRawPeer();
    const { peer } = raw;
    peer.registry.method('echo', (x) => x);
    expect(await raw.send('{"jsonrpc":"2.0","method":"echo","params":[1],"id":1}')).toEqual([
      '{"jsonrpc":"2.0","result":[1],"id":1}',
    ]);
    made.count = 0;
    peer.close(1000, 'done');
    await settle();
    expect(made.count).toBe(0);
  });

  it('makes one error for all the calls pending and running, and each call fails with it', async () => {
    const { a, b } = createPeerPair();
    const aborted: unknown[] = [];
    a.registry.method(
      'hang',
      (_params, ctx) =>
        new Promise((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => {
            aborted.push(ctx.signal.reason);
            reject(ctx.signal.reason as Error);
          });
        }),
    );
    // b's calls are pending on b and running on a.
    const calls = [b.call('hang'), b.call('hang'), b.call('hang')];
    const outcomes = Promise.allSettled(calls);
    await settle();
    made.count = 0;
    a.close(1001, 'going away');
    await settle();
    b.close(1000, 'done');
    const settled = await outcomes;
    // One for the running calls a aborted, one for the calls b had pending.
    expect(made.count).toBe(2);
    expect(aborted).toHaveLength(3);
    expect(new Set(aborted).size).toBe(1);
    expect(aborted[0]).toBeInstanceOf(ConnectionClosedError);
    for (const outcome of settled) {
      expect(outcome.status).toBe('rejected');
      expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(ConnectionClosedError);
    }
  });
});
