import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/*
 * The heap, for tests of what an object keeps alive or what many of them cost: a full
 * collection on demand (V8's gc, exposed at run time so no test needs a flag on the command
 * line) and the heap in use.
 */

let exposed: (() => void) | undefined;

/** Run `rounds` full collections (several: finalizers and weak maps settle over more than one). */
export function fullGc(rounds = 4): void {
  if (!exposed) {
    setFlagsFromString('--expose-gc');
    exposed = runInNewContext('gc') as () => void;
  }
  for (let i = 0; i < rounds; i++) exposed();
}

/** Heap in use but for compiled code, which the optimizer adds to while a measured loop runs. */
export function heapUsedButCode(): number {
  let used = 0;
  for (const space of getHeapSpaceStatistics()) {
    if (space.space_name !== 'code_space') used += space.space_used_size;
  }
  return used;
}

/**
 * Heap (but for compiled code) grown per object by making `count` of them with `make` and keeping
 * them, after a warm-up of `warmUp` more (kept too, so that shapes settle) and full collections:
 * the least of `rounds` rounds, since what else the process allocates meanwhile only adds.
 * `check`, when given, is asserted of every object made (kept alive until then).
 */
export function bytesPerObject<T>(
  make: () => T,
  { count, warmUp, rounds = 3 }: { count: number; warmUp: number; rounds?: number },
  check: (made: T) => boolean = () => true,
): number {
  const round = (): number => {
    // Made whole beforehand: an array growing while measured would count its own backing store.
    const made = new Array<T | undefined>(warmUp + count).fill(undefined);
    for (let i = 0; i < warmUp; i++) made[i] = make();
    fullGc();
    const before = heapUsedButCode();
    for (let i = warmUp; i < warmUp + count; i++) made[i] = make();
    fullGc();
    const grown = heapUsedButCode() - before;
    if (!made.every((m) => m !== undefined && check(m)))
      throw new Error('an object made was not as `check` expects');
    return grown / count;
  };
  return Math.min(...Array.from({ length: rounds }, round));
}
