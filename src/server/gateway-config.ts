// The gateway's one configuration step: `createGateway`'s options checked and resolved into a
// grouped, frozen `GatewayConfig`, every default stated once (`gatewayDefaults`). It takes
// `unknown`, so options read from a file go through the same checks as options in code.
import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import type { Logger } from '../peer/logger.js';
import { middlewareRule } from '../peer/middleware.js';
import type { Middleware } from '../peer/middleware.js';
import {
  checkOptions,
  describe,
  either,
  isRecord,
  numberIn,
  ofType,
  oneOf,
  refuse,
  renamed,
  strings,
} from '../peer/option-rules.js';
import type { Rule } from '../peer/option-rules.js';
import type { Broker } from '../pubsub/broker.js';
import type { EncodingName } from '../encoding/codec.js';
import { encodingsRule, resolveEncodings } from '../encoding/encodings-option.js';
import { ANY_ORIGIN, booleanOriginPredicate } from './admission.js';
import { TrustedProxies } from './client-address.js';
import { defaultClusterEvents, resolveClusterEvents } from './lifecycle-options.js';
import type { ResolvedClusterEvents } from './lifecycle-options.js';
import { perMessageDeflateRule, resolveDeflate } from './deflate-options.js';
import { createLogger } from './logger.js';
import {
  defaultLimits,
  defaultRoutes,
  defaultUserInbox,
  resolveLimits,
  resolvePath,
  resolveRoutes,
  resolveUserInbox,
} from './options.js';
import type {
  GatewayLimits,
  GatewayOptions,
  IdentityOptions,
  ResolvedRoutes,
  ResolvedUserInbox,
  TlsOptions,
} from './options.js';
import { defaultSubscriptionMethods } from './pubsub-types.js';
import type { SubscriptionMethods } from './pubsub-types.js';
import type { Session } from './session.js';
import type { DeflateSettings } from '../transport/deflate-frames.js';
import { DEFAULT_PRESENCE_COALESCE_MS, DEFAULT_PRESENCE_LEASE_MS } from '../pubsub/presence.js';

/** The longest delay a Node timer takes (2^31 - 1 ms, about 24.8 days). */
const MAX_DELAY_MS = 2 ** 31 - 1;

/** The user's own objects (server, broker, logger, hooks, TLS keys) are left as they are. */
const USER_OBJECTS = new Set(['server', 'broker', 'logger', 'tls']);

/**
 * Freeze `value` and the plain objects and arrays in it, except the user's objects: what the
 * configuration made is read-only, what it was given stays the user's.
 */
function deepFreeze<T>(value: T, key = ''): T {
  if (typeof value !== 'object' || value === null || USER_OBJECTS.has(key)) return value;
  if (!Array.isArray(value) && Object.getPrototypeOf(value) !== Object.prototype) return value;
  for (const [name, child] of Object.entries(value)) deepFreeze(child, name);
  return Object.freeze(value);
}

/** Every default of `createGateway`'s options, in one place (hooks default to none). */
export const gatewayDefaults = deepFreeze({
  path: '/rpc',
  /** `rpc` defaults to `path`. */
  routes: defaultRoutes,
  limits: defaultLimits,
  /** What `userInbox: true` means. */
  userInbox: defaultUserInbox,
  /** What `clusterEvents: true` means. */
  clusterEvents: defaultClusterEvents,
  callTimeoutMs: 30_000,
  heartbeatIntervalMs: 30_000,
  /** `true` means `deflateDefaults` (deflate-options.ts). */
  perMessageDeflate: false,
  presenceLeaseMs: DEFAULT_PRESENCE_LEASE_MS,
  presenceCoalesceMs: DEFAULT_PRESENCE_COALESCE_MS,
  refuseWhileBrokerDown: true,
  metrics: true,
  acceptV1: false,
  exposeErrorDetails: false,
  binaryJsonFrames: 'refuse' as 'refuse' | 'text',
  subscriptionMethods: defaultSubscriptionMethods,
  trustedProxies: [] as readonly string[],
  /** What `identity` means when not given, key by key. */
  identity: { inBand: false, inBandDeadlineMs: 10_000, refreshAheadMs: 30_000 },
});

/** `createGateway`'s options, resolved: grouped, defaults filled in, frozen (user objects are not). */
export interface GatewayConfig<C = unknown> {
  readonly http: {
    /** The WebSocket endpoint's path. */
    readonly path: string;
    readonly routes: ResolvedRoutes;
    /** The server given; undefined when the gateway makes its own. */
    readonly server: HttpServer | undefined;
    readonly tls: TlsOptions | undefined;
    readonly httpHandler:
      ((req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>) | undefined;
    /** Undefined: pages on the host the request was sent to (sameHost in admission.ts). */
    readonly allowedOrigins: GatewayOptions<C>['allowedOrigins'];
    readonly trustedProxies: readonly string[];
    readonly selectProtocol: GatewayOptions<C>['selectProtocol'];
    /** 'json' first, then the binary encodings enabled. */
    readonly encodings: readonly EncodingName[];
    /** What a binary frame on a JSON connection gets: a 1003 close, or read as UTF-8 text. */
    readonly binaryJsonFrames: 'refuse' | 'text';
    /** permessage-deflate's settings; undefined when compression is off. */
    readonly perMessageDeflate: DeflateSettings | undefined;
  };
  readonly auth: {
    readonly authenticate: GatewayOptions<C>['authenticate'];
    readonly authorize: GatewayOptions<C>['authorize'];
    readonly userOf: GatewayOptions<C>['userOf'];
  };
  readonly limits: Readonly<Required<GatewayLimits>>;
  /**
   * The limits the options set, as opposed to defaulted: on a server the gateway was given,
   * only those of the HTTP socket bounds that were set apply.
   */
  readonly limitsSet: readonly (keyof GatewayLimits)[];
  readonly timing: {
    readonly callTimeoutMs: number;
    readonly heartbeatIntervalMs: number;
  };
  readonly pubsub: {
    /** The broker given; undefined when the gateway makes (and owns) a MemoryBroker. */
    readonly broker: Broker | undefined;
    readonly subscriptionMethods: Readonly<SubscriptionMethods>;
    /** Undefined when user inboxes are off. */
    readonly userInbox: ResolvedUserInbox | undefined;
    /** Undefined when lifecycle events stay on their node. */
    readonly clusterEvents: ResolvedClusterEvents | undefined;
    readonly refuseWhileBrokerDown: boolean;
    /** Presence's lease and coalescing window (presenceLeaseMs, presenceCoalesceMs). */
    readonly presence: { readonly leaseMs: number; readonly coalesceMs: number };
  };
  readonly protocol: {
    readonly acceptV1: boolean;
    readonly exposeErrorDetails: boolean;
  };
  /** Identity over the connection's life (docs/identity.md); hooks undefined when not given. */
  readonly identity: {
    readonly inBand: boolean;
    readonly carriesToken: IdentityOptions<C>['carriesToken'];
    readonly inBandDeadlineMs: number;
    readonly refreshAheadMs: number;
    readonly expiresAtOf: IdentityOptions<C>['expiresAtOf'];
    readonly topicsOf: IdentityOptions<C>['topicsOf'];
    readonly methodsOf: IdentityOptions<C>['methodsOf'];
    readonly issuedAtOf: IdentityOptions<C>['issuedAtOf'];
  };
  /** Around the handlers, first to last; undefined for none (as for hooks). */
  readonly middleware: readonly Middleware<Session<C>>[] | undefined;
  readonly observability: {
    /** The logger given, or the default pino one. */
    readonly logger: Logger;
    /** Whether Prometheus metrics are served (`routes.metrics` says where). */
    readonly metrics: boolean;
  };
}

const bool = ofType('boolean');
const hook = ofType('function');
const object = (what: string): Rule => ofType('object', what);

/**
 * A list of origins as browsers send them in `Origin` (admission compares them exactly): an
 * entry that none sends (`https://app.example/`, `HTTPS://APP.EXAMPLE`, `app.example`, `*`)
 * would refuse every page 403, so it is refused here, naming the origin it likely means.
 * "null" is sent by every sandboxed iframe and file: page, so any site can send it by framing
 * itself sandboxed: listed, it would let every site in. Refused, saying why; code that means it
 * says so with a predicate. Here, in the one step createGateway and the configuration file share.
 */
const origins: Rule = (value, name) => {
  strings(value, name);
  const list = value as readonly string[];
  list.forEach((entry, index) => {
    if (entry === ANY_ORIGIN) {
      if (list.length === 1) return;
      throw new RangeError(
        `${name}[${index}] "*" admits every origin, so it must be the only entry, not one of ${list.length}`,
      );
    }
    if (entry === 'null') {
      throw new RangeError(
        `${name}[${index}] must not be "null": every sandboxed iframe, file: page and some redirects send Origin: null, so listing it lets in any page that makes itself one (a cross-site page included); to allow it knowingly, pass allowedOrigins a predicate in code`,
      );
    }
    const meant = originOf(entry);
    if (meant === entry) return;
    const hint = meant === undefined ? '' : ` (did you mean ${JSON.stringify(meant)}?)`;
    throw new RangeError(
      `${name}[${index}] must be an origin such as https://app.example (no path, no trailing slash), not ${describe(entry)}${hint}`,
    );
  });
};

/**
 * The Origin a browser sends for pages at `entry`: `scheme://host[:port]` (lower case, no
 * default port) for http, https and the other special schemes; `scheme://host` for an app's or
 * an extension's own scheme (capacitor://localhost, chrome-extension://id). A host (and port)
 * without a scheme is taken as https. Undefined when there is none to name.
 */
function originOf(entry: string): string | undefined {
  const hostOnly = /^[^:/?#\s*]+(:\d+)?$/.test(entry);
  const url = parseUrl(hostOnly ? `https://${entry}` : entry);
  if (!url) return undefined;
  if (url.origin !== 'null') return url.origin;
  // An opaque origin: file: (whose pages send "null"), or a scheme of its own.
  if (url.protocol === 'file:' || url.host === '') return undefined;
  return `${url.protocol}//${url.host}`;
}

function parseUrl(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

/**
 * What each option may be. A null rule: the option is checked by its own resolver (path, routes,
 * limits, userInbox, subscriptionMethods). Every option of `GatewayOptions` is here.
 */
export const gatewayOptionRules: Readonly<Record<keyof GatewayOptions<unknown>, Rule | null>> = {
  path: null,
  routes: null,
  allowedOrigins: either(origins, hook),
  trustedProxies: strings,
  refuseWhileBrokerDown: bool,
  limits: object('an object of limits such as { maxBatch: 50 }'),
  callTimeoutMs: numberIn(0, Infinity, false, ' (0: no timeout)'),
  callTimeout: numberIn(0, Infinity, false, ' (0: no timeout)'),
  heartbeatIntervalMs: numberIn(0, MAX_DELAY_MS, true, ' (0: off)'),
  heartbeatInterval: numberIn(0, MAX_DELAY_MS, true, ' (0: off)'),
  perMessageDeflate: perMessageDeflateRule,
  presenceLeaseMs: numberIn(300, 3_600_000, true),
  presenceCoalesceMs: numberIn(10, 60_000, true),
  userInbox: null,
  clusterEvents: null,
  subscriptionMethods: object('an object { subscribe, notification, unsubscribe }'),
  metrics: bool,
  acceptV1: bool,
  exposeErrorDetails: bool,
  server: (value, name) => {
    if (!isRecord(value) || typeof value['listen'] !== 'function') {
      refuse(name, 'an http.Server or https.Server', value);
    }
  },
  authenticate: hook,
  authorize: hook,
  selectProtocol: hook,
  encodings: encodingsRule,
  binaryJsonFrames: oneOf('refuse', 'text'),
  tls: (value, name) => {
    if (!isRecord(value) || value['cert'] === undefined || value['key'] === undefined) {
      refuse(name, 'an object { cert, key } (PEM strings or Buffers)', value);
    }
  },
  httpHandler: hook,
  logger: (value, name) => {
    if (!isRecord(value) || typeof value['info'] !== 'function') {
      refuse(name, 'a logger (pino, or { trace, debug, info, warn, error, child })', value);
    }
  },
  userOf: hook,
  broker: object('a Broker (MemoryBroker, RedisBroker, NatsBroker)'),
  middleware: middlewareRule,
  identity: object('an object { inBand, inBandDeadlineMs, expiresAtOf, refreshAheadMs, ... }'),
};

/** What each key of the `identity` option may be. */
export const identityRules: Readonly<Record<keyof IdentityOptions<unknown>, Rule>> = {
  inBand: bool,
  carriesToken: hook,
  inBandDeadlineMs: numberIn(100, 300_000, true),
  expiresAtOf: hook,
  refreshAheadMs: numberIn(0, MAX_DELAY_MS, true),
  topicsOf: hook,
  methodsOf: hook,
  issuedAtOf: hook,
};

/** Old names still taken, each with its new one. */
const DEPRECATED = ['callTimeout', 'heartbeatInterval'];

const methodName = ofType('string', 'a method name (a non-empty string)');
const subscriptionMethodRules: Record<keyof SubscriptionMethods, Rule> = {
  subscribe: methodName,
  notification: methodName,
  unsubscribe: methodName,
  history: methodName,
};

/**
 * Check `createGateway`'s options and resolve them: an unknown option is a TypeError (naming
 * the nearest known one), a value of the wrong type a TypeError, one out of its range a
 * RangeError, each naming the option and what it may be. `owner` is what an unknown option is
 * said not to be an option of: `createGateway`, or the configuration file the options came from.
 */
export function resolveGatewayOptions<C = unknown>(
  options: unknown,
  owner = 'createGateway',
): GatewayConfig<C> {
  const given = checkOptions(options, gatewayOptionRules, '', owner, DEPRECATED);
  const o = given as GatewayOptions<C>;
  const path = resolvePath(o.path);
  const metrics = o.metrics ?? gatewayDefaults.metrics;
  const methods = checkOptions(
    o.subscriptionMethods,
    subscriptionMethodRules,
    'subscriptionMethods.',
    'subscriptionMethods',
  );
  for (const [key, value] of Object.entries(methods)) {
    if (value === '') refuse(`subscriptionMethods.${key}`, 'a non-empty string', value, true);
  }
  const callTimeoutMs = renamed(given, 'callTimeoutMs', 'callTimeout') as number | undefined;
  const heartbeatIntervalMs = renamed(given, 'heartbeatIntervalMs', 'heartbeatInterval') as
    number | undefined;
  const identity = checkOptions(
    o.identity,
    identityRules,
    'identity.',
    'identity',
  ) as IdentityOptions<C>;
  const limits = o.limits ?? {};
  // Each entry parsed now, so a bad one is refused here; the gateway parses them again.
  if (o.trustedProxies) new TrustedProxies(o.trustedProxies);
  const logger = o.logger ?? createLogger();
  return deepFreeze<GatewayConfig<C>>({
    http: {
      path,
      routes: resolveRoutes(o.routes, path, metrics),
      server: o.server,
      tls: o.tls,
      httpHandler: o.httpHandler,
      // A predicate's answers are checked as it is asked: only `true` allows (an async one's
      // promise refuses every Origin, logged once), which no check here could see beforehand.
      allowedOrigins:
        typeof o.allowedOrigins === 'function'
          ? booleanOriginPredicate(o.allowedOrigins, logger)
          : o.allowedOrigins && [...o.allowedOrigins],
      trustedProxies: [...(o.trustedProxies ?? gatewayDefaults.trustedProxies)],
      selectProtocol: o.selectProtocol,
      encodings: resolveEncodings(o.encodings),
      binaryJsonFrames: o.binaryJsonFrames ?? gatewayDefaults.binaryJsonFrames,
      perMessageDeflate: resolveDeflate(o.perMessageDeflate ?? gatewayDefaults.perMessageDeflate),
    },
    auth: { authenticate: o.authenticate, authorize: o.authorize, userOf: o.userOf },
    limits: resolveLimits(limits),
    limitsSet: (Object.keys(limits) as (keyof GatewayLimits)[]).filter(
      (key) => limits[key] !== undefined,
    ),
    timing: {
      callTimeoutMs: callTimeoutMs ?? gatewayDefaults.callTimeoutMs,
      heartbeatIntervalMs: heartbeatIntervalMs ?? gatewayDefaults.heartbeatIntervalMs,
    },
    pubsub: {
      broker: o.broker,
      subscriptionMethods: { ...gatewayDefaults.subscriptionMethods, ...methods },
      userInbox: resolveUserInbox(o.userInbox, o.userOf !== undefined),
      clusterEvents: resolveClusterEvents(o.clusterEvents),
      refuseWhileBrokerDown: o.refuseWhileBrokerDown ?? gatewayDefaults.refuseWhileBrokerDown,
      presence: {
        leaseMs: o.presenceLeaseMs ?? gatewayDefaults.presenceLeaseMs,
        coalesceMs: o.presenceCoalesceMs ?? gatewayDefaults.presenceCoalesceMs,
      },
    },
    protocol: {
      acceptV1: o.acceptV1 ?? gatewayDefaults.acceptV1,
      exposeErrorDetails: o.exposeErrorDetails ?? gatewayDefaults.exposeErrorDetails,
    },
    identity: {
      inBand: identity.inBand ?? gatewayDefaults.identity.inBand,
      carriesToken: identity.carriesToken,
      inBandDeadlineMs: identity.inBandDeadlineMs ?? gatewayDefaults.identity.inBandDeadlineMs,
      refreshAheadMs: identity.refreshAheadMs ?? gatewayDefaults.identity.refreshAheadMs,
      expiresAtOf: identity.expiresAtOf,
      topicsOf: identity.topicsOf,
      methodsOf: identity.methodsOf,
      issuedAtOf: identity.issuedAtOf,
    },
    middleware: o.middleware && [...o.middleware],
    observability: { logger, metrics },
  });
}
