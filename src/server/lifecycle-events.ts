/**
 * What happens to sessions, on this node or (with `clusterEvents`) on any node sharing the
 * broker: `gateway.events$`. `node` is the id of the gateway where it happened
 * (`gateway.nodeId`).
 */
export type LifecycleEvent =
  | { type: 'connect'; sessionId: string; user?: string; node: string }
  | {
      type: 'disconnect';
      sessionId: string;
      user?: string;
      /** The WebSocket close code (1000, 1001, 1006 for a connection lost, 4403 revoked, ...). */
      code: number;
      reason: string;
      node: string;
    }
  | { type: 'subscribe'; sessionId: string; topic: string; node: string }
  | { type: 'unsubscribe'; sessionId: string; topic: string; node: string };

/**
 * A user's first session on any node opened (`userOnline$`), or its last one on every node
 * closed (`userOffline$`); `node` is the gateway whose session (or whose lapsed lease) made it so.
 */
export interface UserPresenceChange {
  user: string;
  node: string;
}

/** One window's message between the nodes (`$lifecycle`), as it travels. */
export type LifecycleWire =
  /** A delta: users that came (`on`) and went (`off`) at version `v`, events, how many dropped. */
  | {
      k: 'd';
      n: string;
      v: number;
      on: string[];
      off: string[];
      e: WireEvent[];
      x?: number;
    }
  /** Alive, at version `v` (every third of the lease). */
  | { k: 'h'; n: string; v: number }
  /** The full list of the node's users at version `v`. */
  | { k: 's'; n: string; v: number; u: string[] }
  /** Node `n` asks `of` (every node when absent) for its full list. */
  | { k: 'w'; n: string; of?: string }
  /** Node `n` is stopping: its users are gone. */
  | { k: 'b'; n: string };

/** An event without its node (the message's `n` says it). */
export type WireEvent = DistributiveOmit<LifecycleEvent, 'node'>;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** Whether a parsed message has the shape of one of ours (from a node of this version). */
export function isLifecycleWire(value: unknown): value is LifecycleWire {
  if (typeof value !== 'object' || value === null) return false;
  const { k, n } = value as { k?: unknown; n?: unknown };
  return typeof n === 'string' && typeof k === 'string' && 'dhswb'.includes(k) && k.length === 1;
}
