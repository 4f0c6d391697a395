// A process's memory as the scale benches read it: after `settleMs` for close and timer work to
// finish, and full collections a turn apart (what one frees may let the next free more; needs
// node --expose-gc). heapNoCode is the heap but for compiled code: code the optimizer makes while
// connections open is the process's, not theirs, and each process of a run makes its own.
import { getHeapSpaceStatistics } from 'node:v8';

const COLLECTIONS = 6;

/** process.memoryUsage() once settled and collected, with heapNoCode and whether it could collect. */
export async function settledMemory(settleMs) {
  await new Promise((resolve) => setTimeout(resolve, settleMs));
  const collected = typeof globalThis.gc === 'function';
  if (collected) {
    for (let i = 0; i < COLLECTIONS; i++) {
      globalThis.gc();
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  const heapNoCode = getHeapSpaceStatistics()
    .filter((space) => space.space_name !== 'code_space')
    .reduce((sum, space) => sum + space.space_used_size, 0);
  return { ...process.memoryUsage(), heapNoCode, collected };
}
