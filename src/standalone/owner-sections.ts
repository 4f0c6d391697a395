// The sections of a configuration file that other modules own (upstreams and methods, hooks, the
// server API, tracing): each resolved by its owner's resolver, so the rules live in one place.

/** What those sections resolve to (undefined when the file does not have them). */
export interface OwnerSections {
  readonly upstreams: unknown;
  readonly hooks: unknown;
  readonly serverApi: unknown;
  readonly tracing: unknown;
}

export const ownerSections = {
  /** The top-level keys these sections take. */
  keys: ['upstreams', 'methods', 'hooks', 'serverApi', 'tracing'] as const,

  /** Each section resolved by its owner; a problem goes to `attempt`, which records it. */
  resolve(
    file: Readonly<Record<string, unknown>>,
    attempt: <T>(run: () => T) => T | undefined,
  ): OwnerSections {
    return {
      upstreams: attempt(() => file['upstreams']),
      hooks: attempt(() => file['hooks']),
      serverApi: attempt(() => file['serverApi']),
      tracing: attempt(() => file['tracing']),
    };
  },

  /** Whether a section names each session's user (the connect hook does). */
  givesUser(file: Readonly<Record<string, unknown>>): boolean {
    const hooks = file['hooks'];
    return typeof hooks === 'object' && hooks !== null && 'connect' in hooks;
  },
};
