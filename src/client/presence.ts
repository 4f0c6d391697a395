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
   * The members listed: the first page (at most the topic's `maxListed`), then the joins and
   * leaves the events list (an event past `maxListed` changes only `count`).
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

/** The member list folded from the `$presence` frames of `topic`. */
export function presenceState(
  subscribe: (name: string, params: unknown) => Observable<unknown>,
  topic: string,
): Observable<PresenceState> {
  return subscribe(PRESENCE_SUBSCRIPTION, { topic }).pipe(
    map((frame) => frame as PresenceFrame),
    scan(
      (state: PresenceState, frame: PresenceFrame): PresenceState => {
        if (frame.members) return { count: frame.count, members: [...frame.members] };
        const members = [...state.members];
        for (const gone of frame.left ?? []) {
          const at = members.findIndex((m) => m.sessionId === gone.sessionId);
          if (at >= 0) members.splice(at, 1);
        }
        members.push(...(frame.joined ?? []));
        return { count: frame.count, members };
      },
      { count: 0, members: [] },
    ),
  );
}
