/**
 * Counting what happens in one task or one event-loop turn, for the tests of the per-turn
 * bounds (input-turns.ts): the most counted in one, over a test.
 */

/**
 * The most counted within one task (between two runs of the process's nextTick queue) or, with
 * `'turn'`, within one event-loop turn (from the first count to a setImmediate it schedules).
 */
export class Peak {
  most = 0;
  private now = 0;

  constructor(private readonly span: 'task' | 'turn' = 'task') {}

  add(count = 1): void {
    if (this.now === 0) {
      const end = (): void => {
        this.most = Math.max(this.most, this.now);
        this.now = 0;
      };
      if (this.span === 'task') process.nextTick(end);
      else setImmediate(end);
    }
    this.now += count;
  }
}

/**
 * Call `seen(text)` as `transport`'s session is handed each message, before it takes it
 * (a transport keeps its session's listener as `listener`).
 */
export function tapReceive(transport: object, seen: (text: string) => void): void {
  const listener = (transport as { listener: { receive(text: string): void } }).listener;
  const receive = listener.receive.bind(listener);
  listener.receive = (text) => {
    seen(text);
    receive(text);
  };
}
