// client.presence(topic): a topic's members as one Observable of the current count and list,
// built from the `$presence` subscription (the first page, then the coalesced join/leave events).
// Re-established after a reconnect like any subscription; its first frame then starts the list
// over.
import { map, scan } from 'rxjs';
import type { Observable } from 'rxjs';

/** One member of a topic: one subscription of a session to it. */
export interface PresenceMember {
  sessionId: string;
  user?: string;
  info?: Record<string, unknown>;
}

/** A topic's members as `client.presence(topic)` sees them. */
export interface PresenceState {
  /** Members on every node (exact as of the last frame). */
  count: number;
  /**
   * The members listed, one per session: the first page (at most the topic's `maxListed`),
   * then the joins and leaves the events list (an event past `maxListed` changes only `count`).
   */
  members: PresenceMember[];
}

/** A `$presence` frame: the first page, or an event. */
interface PresenceFrame {
  count: number;
  members?: PresenceMember[];
  joined?: PresenceMember[];
  left?: PresenceMember[];
}

/** The subscription name the server answers presence on. */
export const PRESENCE_SUBSCRIPTION = '$presence';

/**
 * The member list folded from the `$presence` frames of `topic`, one entry per session: the
 * first page can already list a member whose join event comes after it (the event was
 * coalesced while the page was read), so a join of a listed session replaces its entry and a
 * leave removes it.
 */
export function presenceState(
  subscribe: (name: string, params: unknown) => Observable<unknown>,
  topic: string,
): Observable<PresenceState> {
  const start: Folded = { count: 0, listed: new Map() };
  return subscribe(PRESENCE_SUBSCRIPTION, { topic }).pipe(
    map((frame) => frame as PresenceFrame),
    scan((state: Folded, frame: PresenceFrame): Folded => {
      // The first frame (again after a reconnect) starts the list over.
      const listed = new Map(frame.members ? [] : state.listed);
      for (const member of frame.members ?? []) listed.set(member.sessionId, member);
      for (const gone of frame.left ?? []) listed.delete(gone.sessionId);
      for (const member of frame.joined ?? []) listed.set(member.sessionId, member);
      return { count: frame.count, listed };
    }, start),
    map((state): PresenceState => ({ count: state.count, members: [...state.listed.values()] })),
  );
}

/** The fold's state: the count, and the members listed by session id, in the order first seen. */
interface Folded {
  count: number;
  listed: Map<string, PresenceMember>;
}
