/**
 * Per-turn write coalescing: a transport corks its socket on the first write
 * in a turn of the event loop and registers here to be uncorked once the
 * turn's I/O callbacks have all run. Every frame bound for one socket in that
 * turn then leaves in one writev instead of one syscall each; order is unchanged.
 * One setImmediate serves every socket written in the turn.
 */
let tasks: (() => void)[] = [];
let scheduled = false;

function runAll(): void {
  scheduled = false;
  const due = tasks;
  tasks = [];
  for (const task of due) task();
}

/** Run `task` at the end of this turn (in the check phase, after pending I/O callbacks). */
export function atEndOfTurn(task: () => void): void {
  tasks.push(task);
  if (!scheduled) {
    scheduled = true;
    setImmediate(runAll);
  }
}
