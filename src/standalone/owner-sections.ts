// The sections of a configuration file that other modules own (upstreams and methods, hooks, the
// server API, tracing): each resolved by its owner's resolver, so the rules live in one place.
import { resolveServerApiConfig } from '../server-api/config.js';
import type { ServerApiConfig } from '../server-api/config.js';
import { resolveHooksConfig } from '../upstream-hooks/hooks-config.js';
import type { HooksConfig } from '../upstream-hooks/hooks-config.js';
import { resolveTracingConfig } from '../tracing/tracing-config.js';
import type { TracingConfig } from '../tracing/tracing-config.js';
import { resolveUpstreamsConfig } from '../upstream/upstreams-config.js';
import { resolveJwtSection } from './sections.js';
import type { UpstreamsConfig } from '../upstream/upstreams-config.js';

/** What those sections resolve to (undefined when the file does not have them). */
export interface OwnerSections {
  /** Upstream services and the methods routed to them; undefined when the file has neither. */
  readonly upstreams: UpstreamsConfig | undefined;
  /** Hooks to upstreams; undefined when the file has no `hooks`. */
  readonly hooks: HooksConfig | undefined;
  /** The server API for backends; undefined (off) when the file has no `serverApi`. */
  readonly serverApi: ServerApiConfig | undefined;
  /** Off (tracingDefaults) when the file has no `tracing`. */
  readonly tracing: TracingConfig;
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
      upstreams: attempt(() =>
        file['upstreams'] === undefined && file['methods'] === undefined
          ? undefined
          : resolveUpstreamsConfig(file),
      ),
      hooks: attempt(() => (file['hooks'] === undefined ? undefined : resolveHooksConfig(file))),
      serverApi: attempt(() => {
        if (file['serverApi'] === undefined) return undefined;
        const serverApi = resolveServerApiConfig(file['serverApi'], 'serverApi.', file['jwt']);
        // Its jwtAuth options as the top-level jwt's: the rules and the key serve imports.
        resolveJwtSection(serverApi.jwt, 'serverApi.jwt');
        return serverApi;
      }),
      tracing: attempt(() => resolveTracingConfig(file['tracing'])) as TracingConfig,
    };
  },

  /** Whether a section names each session's user (the connect hook does). */
  givesUser(file: Readonly<Record<string, unknown>>): boolean {
    const hooks = file['hooks'];
    return typeof hooks === 'object' && hooks !== null && 'connect' in hooks;
  },
};
