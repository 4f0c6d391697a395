/**
 * What the tests of output turns share (input-turns.ts: a turn's output allowance, and the
 * output turns that write what passes it): the size of an answer, how many calls, how many
 * answers one turn may make, and results counted as their replies are made.
 */
import type { Gateway } from '../../src/server/gateway.js';
import { OUTPUT_CHARS_PER_TURN } from '../../src/transport/input-turns.js';
import { deferred } from './promises.js';
import type { Peak } from './turn-peaks.js';

export const ANSWER_CHARS = 300_000;
export const CALLS = 24;
/** The replies one turn may make: those within the allowance, and the one that passes it. */
export const MOST_PER_TURN = Math.floor(OUTPUT_CHARS_PER_TURN / ANSWER_CHARS) + 1;

/**
 * A result whose text is `chars` characters, counted in `made` as its reply is made (its toJSON
 * runs as JSON.stringify makes the reply's text).
 */
export function counted(made: Pick<Peak, 'add'>, chars: number): unknown {
  return {
    toJSON() {
      made.add(chars);
      return 'x'.repeat(chars);
    },
  };
}

/**
 * Register `gated` on `gateway`: an async method whose calls all settle together once `calls`
 * of them have arrived, each answering ANSWER_CHARS counted in `made`.
 */
export function gatedMethod(gateway: Gateway, calls: number, made: Peak): void {
  const all = deferred();
  let arrived = 0;
  gateway.method('gated', async () => {
    if (++arrived === calls) all.resolve();
    await all.promise;
    return counted(made, ANSWER_CHARS);
  });
}
