// client.presence(topic): a topic's members as one Observable of the current count and list,
// built from the `$presence` subscription (the first page, then the coalesced join/leave events).
// Re-established after a reconnect like any subscription; its first frame then starts the list
// over.
import type { Observable } from 'rxjs';
import { through } from '../peer/hub.js';

/** One member of a topic: one subscription of a session to it. */
export interface PresenceMember {
  /**
   * The membership, unique among the topic's members (a session subscribed twice is two
   * members); absent from a gateway that does not send it, whose members are told apart by
   * session only.
   */
  id?: string;
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

/**
 * The most members a list holds: the most a topic lists (`maxListed` is 1 to 1 000), so that a
 * server listing without end cannot grow it. Past it a join changes only `count`, as past the
 * topic's own `maxListed`.
 */
export const MAX_LISTED = 1000;

/** The subscription name the server answers presence on. */
export const PRESENCE_SUBSCRIPTION = '$presence';

/**
 * The member list folded from the `$presence` frames of `topic`, one entry per session (in the
 * order first seen), for each observer. The frames name memberships (`id`): a session is listed
 * while one of its memberships is, so one of two subscriptions ending leaves it listed. The
 * first page can already list a membership whose join event comes after it (the event was
 * coalesced while the page was read), so a join of a listed membership replaces its entry and a
 * leave removes it.
 */
export function presenceState(
  subscribe: (name: string, params: unknown) => Observable<unknown>,
  topic: string,
): Observable<PresenceState> {
  return through(subscribe(PRESENCE_SUBSCRIPTION, { topic }), (to) => {
    // By membership id (by session id from a gateway that sends none).
    const listed = new Map<string, PresenceMember>();
    const idOf = (member: PresenceMember): string =>
      typeof member.id === 'string' ? member.id : member.sessionId;
    // Past MAX_LISTED only those already listed are updated.
    const list = (member: PresenceMember): void => {
      const id = idOf(member);
      if (listed.size < MAX_LISTED || listed.has(id)) listed.set(id, member);
    };
    return (value) => {
      // The server's data: a frame with no count is passed over, a list that is no list taken as
      // none, an entry with no session id left out (each would otherwise throw out of the
      // frame's handling, an uncaught error).
      const frame = value as PresenceFrame | null;
      if (typeof frame?.count !== 'number') return;
      // The first frame (again after a reconnect) starts the list over.
      if (Array.isArray(frame.members)) listed.clear();
      for (const member of members(frame.members)) list(member);
      for (const gone of members(frame.left)) listed.delete(idOf(gone));
      for (const member of members(frame.joined)) list(member);
      // One entry per session: its latest membership's, where its first one listed stands.
      const sessions = new Map<string, PresenceMember>();
      for (const member of listed.values()) sessions.set(member.sessionId, member);
      to.next({ count: frame.count, members: [...sessions.values()] });
    };
  });
}

/** The entries of a list that are members (a session id at least); none when it is no list. */
const members = (list: unknown): PresenceMember[] =>
  Array.isArray(list)
    ? (list as unknown[]).filter(
        (member): member is PresenceMember =>
          typeof (member as PresenceMember | null)?.sessionId === 'string',
      )
    : [];
