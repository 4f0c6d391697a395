/**
 * Order per socket under write coalescing. A gateway writes to one socket along several paths:
 * text frames gathered under a cork and framed together, shared broadcast frames written as
 * they are, frames past the 64 KiB cap flushed at once and, with permessage-deflate, frames
 * compressed by ws off the thread or compressed once for every subscriber. Whatever the mix,
 * and wherever the tasks and microtasks fall between the sends, the client must receive the
 * frames in the order they were sent (the model: the sequence numbers 0, 1, 2, ...).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import type { GatewayOptions } from '../../src/server/options.js';
import type { Session } from '../../src/server/session.js';
import { RawRpc } from '../support/raw-rpc.js';
import { waitUntil } from '../support/waiting.js';
import { Resources } from '../support/resources.js';

/** Payload sizes: below the deflate threshold, above it, past the 64 KiB cap. */
const PADS = { small: '', medium: 'm'.repeat(2_000), large: 'l'.repeat(70 * 1024) };

type Send = { via: 'notify' | 'publish'; size: keyof typeof PADS };
/** A send, or a boundary: wait for the next task (setImmediate) or for a microtask. */
type Step = Send | 'task' | 'microtask';

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({ via: fc.constantFrom('notify', 'publish'), size: fc.constant('small') }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      via: fc.constantFrom('notify', 'publish'),
      size: fc.constant('medium'),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ via: fc.constantFrom('notify', 'publish'), size: fc.constant('large') }),
  },
  { weight: 2, arbitrary: fc.constantFrom('task', 'microtask') },
) as fc.Arbitrary<Step>;

/** The sequence number a received frame carries (a notification's or a published message's). */
function seqOf(frame: RawRpc['frames'][number]): number {
  if (frame.method === 'm') return (frame.params as [number])[0];
  return (frame.params as { result: { n: number } }).result.n;
}

function orderProperty(name: string, options: GatewayOptions<unknown>): void {
  describe(name, () => {
    const res = new Resources();
    let gateway: Gateway;
    let raw: RawRpc;
    let session: Session;

    beforeAll(async () => {
      ({ gateway } = await res.gateway(options).then(async (running) => {
        running.gateway.topic('order', { highWaterMark: 64 * 1024 * 1024 });
        raw = await RawRpc.open(running.url);
        res.track(raw.socket);
        return running;
      }));
      expect(raw.socket.extensions.includes('permessage-deflate')).toBe(
        options.perMessageDeflate !== undefined,
      );
      expect((await raw.request('subscribe', ['order'])).result).toBeTypeOf('string');
      await waitUntil(() => gateway.sessions.size === 1, 'the session to open');
      session = [...gateway.sessions.values()][0]!;
    });
    afterAll(() => res.cleanup());

    it('delivers every frame in the order it was sent, whatever the mix of paths and boundaries', async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 40 }), async (steps) => {
          raw.frames.splice(0);
          let sent = 0;
          for (const step of steps) {
            if (step === 'task') await new Promise((resolve) => setImmediate(resolve));
            else if (step === 'microtask') await Promise.resolve();
            else {
              const n = sent++;
              const pad = PADS[step.size];
              if (step.via === 'notify') session.notify('m', [n, pad]);
              else void gateway.publish('order', { n, pad });
            }
          }
          await raw.until(() => raw.frames.length >= sent, `${sent} frames`);
          expect(raw.frames.map(seqOf)).toEqual(Array.from({ length: sent }, (_, i) => i));
        }),
        { numRuns: 40 },
      );
    });
  });
}

orderProperty('order per socket', {});
orderProperty('order per socket with permessage-deflate', {
  perMessageDeflate: { threshold: 1_024 },
});
