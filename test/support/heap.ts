import { getHeapSnapshot, getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
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

/**
 * The self sizes (bytes, as a heap snapshot counts them: the object's own fields, not what they
 * point to) of the live objects whose constructor is named `name`: exact, unlike a reading of
 * the heap in use, which moves with whatever else the process allocates.
 */
export async function selfSizesOf(name: string): Promise<number[]> {
  let text = '';
  for await (const chunk of getHeapSnapshot()) text += String(chunk);
  const snapshot = JSON.parse(text) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
    nodes: number[];
    strings: string[];
  };
  const { node_fields: fields, node_types: types } = snapshot.snapshot.meta;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const objectType = types[0].indexOf('object');
  const sizes: number[] = [];
  const { nodes, strings } = snapshot;
  for (let i = 0; i < nodes.length; i += width) {
    if (nodes[i + typeAt] === objectType && strings[nodes[i + nameAt]!] === name) {
      sizes.push(nodes[i + sizeAt]!);
    }
  }
  return sizes;
}
