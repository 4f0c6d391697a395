/** What one other node said its users are, and until when that holds. */
interface NodeView {
  /** The version of its user list the view is at; -1 until a snapshot arrived. */
  version: number;
  users: Set<string>;
  /** Its lease: past this, without a word from it, its users are taken as gone. */
  expiresAt: number;
  /** When a snapshot was last asked of it (asked at most once per `askEveryMs`). */
  askedAt: number;
}

/** A user came online or went offline, and the node whose change made it so. */
export type UserChange = (user: string, online: boolean, node: string) => void;

/**
 * Which users have a session on some node: this node's users, and every other node's as that
 * node last said (deltas numbered by a version, a full list when a version was missed). A user
 * is online while at least one node lists it; `changed` is told when that goes from none to
 * one or back. Other nodes hold a lease: one not heard from for `leaseMs` is dropped, with its
 * users. Pure state: the messages are sent and received by ClusterLifecycle.
 */
export class UserDirectory {
  private readonly nodes = new Map<string, NodeView>();
  /** How many nodes (this one included) list each user. */
  private readonly listedBy = new Map<string, number>();
  /** This node's users: sessions per user. */
  private readonly local = new Map<string, number>();

  constructor(
    private readonly nodeId: string,
    private readonly leaseMs: number,
    private readonly askEveryMs: number,
    private readonly changed: UserChange,
  ) {}

  isOnline(user: string): boolean {
    return this.listedBy.has(user);
  }

  /** This node's users (one entry per user with a session here). */
  localUsers(): IterableIterator<string> {
    return this.local.keys();
  }

  /** Whether `user` has a session on this node. */
  isLocal(user: string): boolean {
    return this.local.has(user);
  }

  /** Users online on some node: how many. */
  get onlineCount(): number {
    return this.listedBy.size;
  }

  /** A session of `user` opened here; true when it is the user's first here. */
  sessionOpened(user: string): boolean {
    const sessions = (this.local.get(user) ?? 0) + 1;
    this.local.set(user, sessions);
    if (sessions > 1) return false;
    this.list(user, this.nodeId);
    return true;
  }

  /** A session of `user` closed here; true when it was the user's last here. */
  sessionClosed(user: string): boolean {
    const sessions = (this.local.get(user) ?? 0) - 1;
    if (sessions > 0) {
      this.local.set(user, sessions);
      return false;
    }
    if (!this.local.delete(user)) return false;
    this.unlist(user, this.nodeId);
    return true;
  }

  /**
   * A node's delta: users that came and went there, at `version`. Applied in any case (the
   * sets make it idempotent); returns whether a snapshot should be asked for (the node is new,
   * or a version was missed).
   */
  delta(node: string, version: number, online: readonly string[], offline: readonly string[]) {
    const view = this.view(node);
    for (const user of online) if (!view.users.has(user)) this.add(view, user, node);
    for (const user of offline) if (view.users.delete(user)) this.unlist(user, node);
    const missed = view.version < 0 || version !== view.version + 1;
    view.version = version;
    return missed && this.mayAsk(view);
  }

  /** A node's full list at `version`: replaces what was known of it. */
  snapshot(node: string, version: number, users: readonly string[]): void {
    const view = this.view(node);
    if (view.version > version) return; // a later delta came first: it is newer
    const next = new Set(users);
    for (const user of view.users) if (!next.has(user)) this.unlist(user, node);
    for (const user of next) if (!view.users.has(user)) this.list(user, node);
    view.users = next;
    view.version = version;
  }

  /** A node says it is alive at `version`; returns whether a snapshot should be asked for. */
  heartbeat(node: string, version: number): boolean {
    const view = this.view(node);
    return view.version !== version && this.mayAsk(view);
  }

  /** A node left (it said so, or its lease lapsed): its users are no longer listed by it. */
  drop(node: string): void {
    const view = this.nodes.get(node);
    if (!view) return;
    this.nodes.delete(node);
    for (const user of view.users) this.unlist(user, node);
  }

  /** Drop every node whose lease lapsed by `now`; returns their ids. */
  expire(now = Date.now()): string[] {
    const lapsed = [...this.nodes].filter(([, view]) => view.expiresAt < now).map(([id]) => id);
    for (const node of lapsed) this.drop(node);
    return lapsed;
  }

  /** Every other node's view dropped (this node is stopping). */
  clear(): void {
    for (const node of [...this.nodes.keys()]) this.drop(node);
  }

  /** The node's view, made when first heard of, its lease renewed. */
  private view(node: string): NodeView {
    let view = this.nodes.get(node);
    if (!view) {
      view = { version: -1, users: new Set(), expiresAt: 0, askedAt: -Infinity };
      this.nodes.set(node, view);
    }
    view.expiresAt = Date.now() + this.leaseMs;
    return view;
  }

  private mayAsk(view: NodeView): boolean {
    const now = Date.now();
    if (now - view.askedAt < this.askEveryMs) return false;
    view.askedAt = now;
    return true;
  }

  private add(view: NodeView, user: string, node: string): void {
    view.users.add(user);
    this.list(user, node);
  }

  private list(user: string, node: string): void {
    const count = (this.listedBy.get(user) ?? 0) + 1;
    this.listedBy.set(user, count);
    if (count === 1) this.changed(user, true, node);
  }

  private unlist(user: string, node: string): void {
    const count = (this.listedBy.get(user) ?? 0) - 1;
    if (count > 0) {
      this.listedBy.set(user, count);
      return;
    }
    this.listedBy.delete(user);
    this.changed(user, false, node);
  }
}
