/**
 * A stand-in for a gateway Session where only what revocation reads and does matters: its id,
 * user and context, and a `close` that records the code and reason instead of closing a socket.
 */
export interface FakeSession<C> {
  id: string;
  user: string | undefined;
  context: C;
  isClosed: boolean;
  closedWith: { code: number; reason: string } | undefined;
  logger: { info(): void };
  close(code: number, reason: string): void;
}

/** An open fake session. */
export function fakeSession<C>(id: string, user: string | undefined, context: C): FakeSession<C> {
  return {
    id,
    user,
    context,
    isClosed: false,
    closedWith: undefined,
    logger: { info: () => undefined },
    close(code, reason) {
      this.isClosed = true;
      this.closedWith = { code, reason };
    },
  };
}
