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

/**
 * Whether a parsed message has the shape of one of ours (from a node of this version), every
 * field of its kind the type it must be: what else reaches the topic (another program on the
 * broker) changes no user list and reaches no observer of events$.
 */
export function isLifecycleWire(value: unknown): value is LifecycleWire {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const wire = value as Record<string, unknown>;
  if (typeof wire['n'] !== 'string') return false;
  const version = Number.isSafeInteger(wire['v']);
  switch (wire['k']) {
    case 'd':
      return (
        version &&
        isStrings(wire['on']) &&
        isStrings(wire['off']) &&
        Array.isArray(wire['e']) &&
        wire['e'].every(isWireEvent) &&
        (wire['x'] === undefined || Number.isSafeInteger(wire['x']))
      );
    case 'h':
      return version;
    case 's':
      return version && isStrings(wire['u']);
    case 'w':
      return wire['of'] === undefined || typeof wire['of'] === 'string';
    case 'b':
      return true;
    default:
      return false;
  }
}

function isStrings(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string');
}

const EVENT_FIELDS = new Set(['type', 'sessionId', 'user', 'topic', 'code', 'reason']);

/** One event of a delta: a WireEvent's fields, each of its type, and no other. */
function isWireEvent(value: unknown): value is WireEvent {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const event = value as Record<string, unknown>;
  if (Object.keys(event).some((key) => !EVENT_FIELDS.has(key))) return false;
  if (typeof event['sessionId'] !== 'string') return false;
  const user = event['user'] === undefined || typeof event['user'] === 'string';
  switch (event['type']) {
    case 'connect':
      return user && event['topic'] === undefined && event['code'] === undefined;
    case 'disconnect':
      return (
        user &&
        Number.isInteger(event['code']) &&
        typeof event['reason'] === 'string' &&
        event['topic'] === undefined
      );
    case 'subscribe':
    case 'unsubscribe':
      return (
        typeof event['topic'] === 'string' &&
        event['user'] === undefined &&
        event['code'] === undefined &&
        event['reason'] === undefined
      );
    default:
      return false;
  }
}
