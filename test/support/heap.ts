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
