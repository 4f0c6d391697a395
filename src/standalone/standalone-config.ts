// A configuration file's value checked as a whole: the library's data options (through
// resolveGatewayOptions: the same rules and messages as createGateway's), the standalone
// server's own sections, and the sections other modules own, each through its owner's resolver.
// Every problem is collected (at least the first of each section), so check-config can list
// them all; resolveStandaloneConfig throws the first.
import { checkOptions, isRecord, refuse } from '../peer/option-rules.js';
import type { Rule } from '../peer/option-rules.js';
import { resolveGatewayOptions } from '../server/gateway-config.js';
import type { GatewayDataOptions, GatewayOptions, IdentityOptions } from '../server/options.js';
import type { JwtAuthOptions } from '../server/jwt/jwt-options.js';
import { ownerSections } from './owner-sections.js';
import type { OwnerSections } from './owner-sections.js';
import {
  resolveBroker,
  resolveJwt,
  resolveListen,
  resolveShutdown,
  resolveStatic,
  resolveTls,
  resolveTopics,
} from './sections.js';
import type {
  BrokerConfig,
  ListenConfig,
  ShutdownConfig,
  StaticConfig,
  TlsFilesConfig,
  TopicConfig,
} from './sections.js';

/** The library's options a file may hold: the data options, and identity's data keys. */
export type GatewayFileOptions = GatewayDataOptions & {
  /** Names only ('msgpack', 'cbor'): the codecs' packages are loaded when the gateway starts. */
  encodings?: GatewayOptions<unknown>['encodings'];
  identity?: Pick<IdentityOptions<unknown>, 'inBand' | 'inBandDeadlineMs' | 'refreshAheadMs'>;
};

/** A configuration file, checked and resolved: what `serve` assembles a gateway from. */
export interface StandaloneConfig extends OwnerSections {
  /** The library's data options (docs/options.md), as given; checked by resolveGatewayOptions. */
  readonly gateway: Readonly<GatewayFileOptions>;
  readonly listen: ListenConfig;
  readonly tls: TlsFilesConfig | undefined;
  readonly broker: BrokerConfig;
  readonly topics: Readonly<Record<string, TopicConfig>>;
  readonly static: StaticConfig | undefined;
  readonly shutdown: ShutdownConfig;
  /** jwtAuth's options; undefined: no JWT identity. */
  readonly jwt: JwtAuthOptions | undefined;
}

/** The library's data options a file may hold (the deprecated names are for code only). */
const GATEWAY_DATA_KEYS = [
  'path',
  // Before routes, which depends on it.
  'metrics',
  'routes',
  'allowedOrigins',
  'trustedProxies',
  'refuseWhileBrokerDown',
  'limits',
  'callTimeoutMs',
  'heartbeatIntervalMs',
  'userInbox',
  'subscriptionMethods',
  'acceptV1',
  'exposeErrorDetails',
  'perMessageDeflate',
  'binaryJsonFrames',
  'encodings',
  'presenceLeaseMs',
  'presenceCoalesceMs',
  'clusterEvents',
  'identity',
] as const satisfies readonly (keyof GatewayDataOptions | 'encodings' | 'identity')[];

/** `identity`'s keys that are data; its hooks (expiresAtOf, topicsOf, ...) come from jwt or hooks. */
const IDENTITY_DATA_RULES: Record<string, Rule | null> = {
  inBand: null,
  inBandDeadlineMs: null,
  refreshAheadMs: null,
};

/** The standalone server's own sections and their resolvers. */
const OWN_SECTIONS = {
  listen: resolveListen,
  tls: resolveTls,
  broker: resolveBroker,
  topics: resolveTopics,
  static: resolveStatic,
  shutdown: resolveShutdown,
  jwt: resolveJwt,
} as const;

/** Every top-level key of a file: no rule here, each is checked by its section's resolver. */
const TOP_LEVEL: Readonly<Record<string, null>> = Object.fromEntries(
  [...GATEWAY_DATA_KEYS, ...Object.keys(OWN_SECTIONS), ...ownerSections.keys].map((key) => [
    key,
    null,
  ]),
);

/** What examining a file's value found: the config when there is no problem. */
export interface ConfigExamination {
  readonly config: StandaloneConfig | undefined;
  /** Each a TypeError or RangeError whose message names the path in the file. */
  readonly problems: readonly Error[];
}

/**
 * Check `value` (what loadConfigFile returned) and collect every problem, at least the first
 * of each section; `source` names the file in the message of an unknown top-level key.
 */
export function examineStandaloneConfig(
  value: unknown,
  source = 'the configuration file',
): ConfigExamination {
  const problems: Error[] = [];
  const attempt = <T>(run: () => T): T | undefined => {
    try {
      return run();
    } catch (err) {
      const problem = err instanceof Error ? err : new Error(String(err));
      // One section resolved inside another (the upstreams inside the hooks) finds the same
      // problem again: told once.
      if (!problems.some((seen) => seen.message === problem.message)) problems.push(problem);
      return undefined;
    }
  };
  const file = value ?? {};
  if (!isRecord(file)) {
    attempt(() => refuse(source, 'an object of options and sections', value));
    return { config: undefined, problems };
  }
  for (const key of Object.keys(file)) {
    attempt(() => checkOptions({ [key]: undefined }, TOP_LEVEL, '', source));
  }
  const gateway = examineGatewayOptions(file, source, attempt);
  const own = Object.fromEntries(
    Object.entries(OWN_SECTIONS).map(([key, resolve]) => [
      key,
      attempt(() => (resolve as (v: unknown) => unknown)(file[key])),
    ]),
  );
  const owned = ownerSections.resolve(file, attempt);
  if (file['jwt'] !== undefined && ownerSections.givesUser(file)) {
    attempt(() => {
      throw new TypeError(
        'jwt and hooks.connect both decide who may connect: give one of them (the connect hook can verify the token itself)',
      );
    });
  }
  if (problems.length > 0) return { config: undefined, problems };
  const config = Object.freeze({ gateway, ...own, ...owned }) as StandaloneConfig;
  return { config, problems };
}

/**
 * Check `value` and resolve it into a StandaloneConfig; the first problem is thrown (a
 * TypeError or RangeError naming the path in the file and what it may be).
 */
export function resolveStandaloneConfig(
  value: unknown,
  source = 'the configuration file',
): StandaloneConfig {
  const { config, problems } = examineStandaloneConfig(value, source);
  if (config) return config;
  throw problems[0] ?? new Error(`${source} could not be resolved`);
}

/**
 * The library's data options of the file, each checked on its own by resolveGatewayOptions (so
 * each bad one is reported; `routes` with `path` and `metrics`, which it depends on).
 */
function examineGatewayOptions(
  file: Record<string, unknown>,
  source: string,
  attempt: <T>(run: () => T) => T | undefined,
): GatewayFileOptions {
  const data: Record<string, unknown> = {};
  for (const key of GATEWAY_DATA_KEYS) {
    if (file[key] !== undefined) data[key] = file[key];
  }
  // A user for each session comes from jwt or the connect hook; userInbox needs one.
  const hasUser = file['jwt'] !== undefined || ownerSections.givesUser(file);
  const userOf = hasUser ? { userOf: () => undefined } : {};
  const valid: Record<string, unknown> = {};
  for (const key of GATEWAY_DATA_KEYS) {
    if (data[key] === undefined) continue;
    const ok = attempt(() => {
      if (key === 'identity' && isRecord(data[key])) {
        checkOptions(
          data[key],
          IDENTITY_DATA_RULES,
          'identity.',
          'identity in a configuration file',
        );
      }
      if (key === 'userInbox' && data[key] !== false && !hasUser) {
        throw new TypeError(
          'userInbox needs a user for each session: set jwt, or hooks.connect (which names the user)',
        );
      }
      const context = key === 'routes' ? { path: valid['path'], metrics: valid['metrics'] } : {};
      resolveGatewayOptions({ ...context, [key]: data[key], ...userOf }, source);
      return true;
    });
    if (ok) valid[key] = data[key];
  }
  return Object.freeze(data) as GatewayFileOptions;
}
