/**
 * Lists of at most this many ids are searched as they are: a Set costs more to make than a
 * short search does. Above it, a Set is made once per message and each subscriber's check is
 * one lookup instead of up to MAX_EXCEPT (64) comparisons.
 */
const LINEAR_MAX = 8;

/**
 * Whether a session id is among those a message leaves out (BrokerMessage.except): the same
 * answer as `except.includes(id)`, made once per message and asked once per local subscriber.
 */
export function exceptMatcher(except: readonly string[]): (id: string) => boolean {
  if (except.length <= LINEAR_MAX) return (id) => except.includes(id);
  const ids = new Set(except);
  return (id) => ids.has(id);
}
