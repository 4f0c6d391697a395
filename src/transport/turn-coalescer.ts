/**
 * Per-turn write coalescing: a transport corks its socket on the first write
 * in a turn of the event loop and registers here to be uncorked once the
 * turn's I/O callbacks have all run. Every frame bound for one socket in that
 * turn then leaves in one writev instead of one syscall each; order is unchanged.
 * One setImmediate serves every socket written in the turn.
 */
/** Something corked this turn; `endTurn` uncorks it. */
export interface TurnTarget {
  endTurn(): void;
}

let tasks: TurnTarget[] = [];
let scheduled = false;

function runAll(): void {
  scheduled = false;
  const due = tasks;
  tasks = [];
  for (const target of due) target.endTurn();
}

/** Call `target.endTurn()` at the end of this turn (in the check phase, after pending I/O callbacks). */
export function atEndOfTurn(target: TurnTarget): void {
  tasks.push(target);
  if (!scheduled) {
    scheduled = true;
    setImmediate(runAll);
  }
}
