// One coalescing window of a topic's join/leave changes: everything that happened on every node
// within `presenceCoalesceMs`, as one event. A leave cancels a join of the same member within
// the window (it was never seen), and each list holds at most `maxListed` members; the changes
// past that are counted, not kept, so a window costs bounded memory however many joins come.
import type { PresenceEntry, PresenceMember } from '../pubsub/presence.js';
import { publicMember } from '../pubsub/presence.js';

/** A topic's coalesced changes, as `gateway.presence(topic).events$` and `$presence` carry them. */
export interface PresenceEvent {
  joined: PresenceMember[];
  left: PresenceMember[];
  /** The topic's members after the window (read from the broker). */
  count: number;
  /** Changes of the window left out of `joined` and `left` (beyond `maxListed`). */
  truncated?: number;
}

export class PresenceWindow {
  private joined = new Map<string, PresenceEntry>();
  private left = new Map<string, PresenceEntry>();
  private truncated = 0;

  constructor(private readonly maxListed: number) {}

  /** Nothing happened since the last `take`. */
  get empty(): boolean {
    return this.joined.size === 0 && this.left.size === 0 && this.truncated === 0;
  }

  add(joined: readonly PresenceEntry[], left: readonly PresenceEntry[]): void {
    for (const entry of joined) {
      if (this.joined.size >= this.maxListed) this.truncated++;
      else this.joined.set(entry.key, entry);
    }
    for (const entry of left) {
      if (this.joined.delete(entry.key)) continue;
      if (this.left.size >= this.maxListed) this.truncated++;
      else this.left.set(entry.key, entry);
    }
  }

  /** The window's event (with the count given) and a new, empty window. */
  take(count: number): PresenceEvent {
    const event: PresenceEvent = {
      joined: [...this.joined.values()].map(publicMember),
      left: [...this.left.values()].map(publicMember),
      count,
    };
    if (this.truncated > 0) event.truncated = this.truncated;
    this.joined = new Map();
    this.left = new Map();
    this.truncated = 0;
    return event;
  }
}
