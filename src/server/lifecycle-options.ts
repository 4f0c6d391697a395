import { checkOptions, isRecord } from '../peer/option-rules.js';

/** `GatewayOptions.clusterEvents` as an object: how lifecycle events travel between nodes. */
export interface ClusterEventsOptions {
  /**
   * How long another node counts this node's users as online without hearing from it; it
   * says it is alive every third of this. A node that dies (SIGKILL) has its users offline
   * everywhere within `leaseMs` plus a third. Default 15 000.
   */
  leaseMs?: number;
  /** Events and user changes are sent at most once per this window, in one broker message. Default 250. */
  flushMs?: number;
  /** Most events one window sends; the rest of the window's events are dropped (counted). Default 1 000. */
  maxEventsPerFlush?: number;
}

export type ResolvedClusterEvents = Readonly<Required<ClusterEventsOptions>>;

/** What `clusterEvents: true` means. */
export const defaultClusterEvents: ResolvedClusterEvents = {
  leaseMs: 15_000,
  flushMs: 250,
  maxEventsPerFlush: 1_000,
};

const BOUNDS: Record<keyof ClusterEventsOptions, [number, number, string]> = {
  leaseMs: [300, 600_000, '300 to 600000'],
  flushMs: [10, 10_000, '10 to 10000'],
  maxEventsPerFlush: [1, 100_000, '1 to 100000'],
};

/**
 * Check `GatewayOptions.clusterEvents` once, when the gateway is made: undefined when off; a
 * TypeError or RangeError naming the option when it is not usable.
 */
export function resolveClusterEvents(value: unknown): ResolvedClusterEvents | undefined {
  if (value === undefined || value === false) return undefined;
  if (value !== true && !isRecord(value)) {
    throw new TypeError(
      'clusterEvents must be true, false or { leaseMs, flushMs, maxEventsPerFlush }',
    );
  }
  const given = (value === true ? {} : value) as Record<string, unknown>;
  const resolved = { ...defaultClusterEvents };
  for (const key of Object.keys(given)) {
    if (!Object.hasOwn(BOUNDS, key)) refuseUnknownKey('clusterEvents', key, BOUNDS);
    const option = given[key];
    if (option === undefined) continue;
    const [min, max, range] = BOUNDS[key as keyof ClusterEventsOptions];
    if (typeof option !== 'number') {
      throw new TypeError(`clusterEvents.${key} must be a number, not ${typeof option}`);
    }
    if (!Number.isInteger(option) || option < min || option > max) {
      throw new RangeError(`clusterEvents.${key} must be an integer from ${range}, not ${option}`);
    }
    resolved[key as keyof ClusterEventsOptions] = option;
  }
  if (resolved.flushMs * 3 > resolved.leaseMs) {
    throw new RangeError(
      `clusterEvents.flushMs must be at most a third of clusterEvents.leaseMs (${Math.floor(resolved.leaseMs / 3)}), not ${resolved.flushMs}`,
    );
  }
  return Object.freeze(resolved);
}

/**
 * Refuse `key` of the object option `owner`, not a key of `known`, as checkOptions refuses an
 * unknown option: a TypeError naming `owner.key` and the nearest known key, if one is near.
 */
export function refuseUnknownKey(owner: string, key: string, known: object): never {
  const rules = Object.fromEntries(Object.keys(known).map((name) => [name, null]));
  checkOptions({ [key]: undefined }, rules, `${owner}.`, owner);
  // Not reached: checkOptions refuses a key its rules do not have.
  throw new TypeError(`${owner}.${key} is not an option of ${owner}`);
}
