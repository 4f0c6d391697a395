/**
 * limits.maxConnectionsPerUser: the sessions of each user (`userOf`) on this node, so that one
 * account cannot hold every connection slot of the node. A session counts from when its user is
 * known (its upgrade's `authenticate`, or an in-band `rpc.authenticate`) until it closes; one
 * without a user (anonymous, or in-band and not authenticated yet) does not count. Only users
 * with sessions have an entry; nothing here runs on a timer.
 *
 * The gate is asked (`admits`) and the session counted (`opened`) in the same turn, with no
 * await in between, so two connections of a user decided together are both counted.
 */
export class UserConnections {
  private readonly sessions = new Map<string, number>();

  constructor(
    /** Sessions one user may have on this node; Infinity: no bound. */
    readonly max: number,
  ) {}

  /** Users with a session counted here. */
  get users(): number {
    return this.sessions.size;
  }

  /** The sessions of `user` counted here. */
  sessionsOf(user: string): number {
    return this.sessions.get(user) ?? 0;
  }

  /** Whether one more session of `user` may open. */
  admits(user: string): boolean {
    return this.sessionsOf(user) < this.max;
  }

  /** A session of `user` has its identity: it counts until `closed`. */
  opened(user: string): void {
    this.sessions.set(user, this.sessionsOf(user) + 1);
  }

  /** A session of `user` that `opened` counted has closed. */
  closed(user: string): void {
    const left = this.sessionsOf(user) - 1;
    if (left > 0) this.sessions.set(user, left);
    else this.sessions.delete(user);
  }
}
