// Authorization from the session's claims (`identity.topicsOf`, `identity.methodsOf`): lists of
// name patterns in the syntax of topic declarations (an exact name, or a prefix ending in `*`).
// Apart from the hooks so the common case needs no code, and so the check is one function the
// call path, the subscribe path and the re-authorization after a refresh all share.
import type { Logger } from '../peer/logger.js';

/** Whether `name` matches one of `patterns`: equal to it, or starting with a `*` pattern's prefix. */
export function matchesAny(patterns: readonly string[], name: string): boolean {
  for (const pattern of patterns) {
    if (pattern.endsWith('*') ? name.startsWith(pattern.slice(0, -1)) : name === pattern) {
      return true;
    }
  }
  return false;
}

/**
 * Whether the claims `patternsOf(context)` allow `name`: undefined claims restrict nothing.
 * A hook that throws, or returns something that is not an array, allows nothing (logged):
 * a session whose claims cannot be read must not get every right.
 */
export function claimsAllow<C>(
  patternsOf: ((context: C) => readonly string[] | undefined) | undefined,
  context: C,
  name: string,
  logger: Logger,
  hookName: string,
): boolean {
  if (!patternsOf) return true;
  let patterns: readonly string[] | undefined;
  try {
    patterns = patternsOf(context);
  } catch (err) {
    logger.error({ err }, `identity.${hookName} failed: refused`);
    return false;
  }
  if (patterns === undefined) return true;
  if (!Array.isArray(patterns)) {
    logger.error({ returned: typeof patterns }, `identity.${hookName} did not return an array`);
    return false;
  }
  return matchesAny(patterns, name);
}
