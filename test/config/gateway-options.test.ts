import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createGateway, defaultLimits, silentLogger } from '../../src/index.js';
import { captureLogger } from '../support/logging.js';
import {
  gatewayDefaults,
  gatewayOptionRules,
  resolveGatewayOptions,
} from '../../src/server/gateway-config.js';

const noop = (): undefined => undefined;

/** One refused value per option that can be refused: the error class and what its message says. */
const refused: [
  name: string,
  options: Record<string, unknown>,
  error: typeof TypeError,
  says: string,
][] = [
  [
    'identity',
    { identity: 'jwt' },
    TypeError,
    'identity must be an object { inBand, inBandDeadlineMs, expiresAtOf, refreshAheadMs, ... }, not "jwt"',
  ],
  [
    'middleware',
    { middleware: 'log' },
    TypeError,
    'middleware must be an array of functions, not "log"',
  ],
  [
    'perMessageDeflate',
    { perMessageDeflate: 'on' },
    TypeError,
    'perMessageDeflate must be a boolean or an object { threshold, level, memLevel }, not "on"',
  ],
  [
    'presenceLeaseMs',
    { presenceLeaseMs: 100 },
    RangeError,
    'presenceLeaseMs must be an integer from 300 to 3600000, not 100',
  ],
  [
    'presenceCoalesceMs',
    { presenceCoalesceMs: 0 },
    RangeError,
    'presenceCoalesceMs must be an integer from 10 to 60000, not 0',
  ],
  [
    'clusterEvents',
    { clusterEvents: 'yes' },
    TypeError,
    'clusterEvents must be true, false or { leaseMs, flushMs, maxEventsPerFlush }',
  ],
  [
    'unknown option',
    { heartbeatIntervl: 5 },
    TypeError,
    'heartbeatIntervl is not an option of createGateway (did you mean heartbeatIntervalMs?)',
  ],
  [
    'options not an object',
    'x' as unknown as Record<string, unknown>,
    TypeError,
    'createGateway must be an object',
  ],
  ['path type', { path: 3 }, TypeError, 'path must be a string'],
  ['path value', { path: 'rpc' }, RangeError, 'path must start with "/"'],
  ['routes type', { routes: 'x' }, TypeError, 'routes must be an object'],
  ['routes key', { routes: { health: '/h' } }, TypeError, 'routes.health is not a route'],
  ['routes value', { routes: { livez: 'livez' } }, RangeError, 'routes.livez must start with "/"'],
  [
    'allowedOrigins',
    { allowedOrigins: 'https://a.example' },
    TypeError,
    'allowedOrigins must be an array of strings',
  ],
  [
    'allowedOrigins entry',
    { allowedOrigins: ['https://app.example/'] },
    RangeError,
    'allowedOrigins[0] must be an origin such as https://app.example (no path, no trailing slash), not "https://app.example/" (did you mean "https://app.example"?)',
  ],
  [
    'trustedProxies type',
    { trustedProxies: '10.0.0.0/8' },
    TypeError,
    'trustedProxies must be an array of strings',
  ],
  [
    'trustedProxies value',
    { trustedProxies: ['10.0.0.0/99'] },
    TypeError,
    'trustedProxies: "10.0.0.0/99" is not an IP address or CIDR subnet',
  ],
  [
    'refuseWhileBrokerDown',
    { refuseWhileBrokerDown: 'yes' },
    TypeError,
    'refuseWhileBrokerDown must be a boolean, not "yes"',
  ],
  ['limits type', { limits: [1] }, TypeError, 'limits must be an object of limits'],
  [
    'limits key',
    { limits: { maxBatchs: 1 } },
    TypeError,
    'limits.maxBatchs is not an option of limits (did you mean limits.maxBatch?)',
  ],
  [
    'limits value',
    { limits: { maxBatch: 0 } },
    RangeError,
    'limits.maxBatch must be an integer at least 1, not 0',
  ],
  [
    'callTimeoutMs type',
    { callTimeoutMs: 'x' },
    TypeError,
    'callTimeoutMs must be a number at least 0 (0: no timeout), not "x"',
  ],
  [
    'callTimeoutMs range',
    { callTimeoutMs: -1 },
    RangeError,
    'callTimeoutMs must be a number at least 0 (0: no timeout), not -1',
  ],
  [
    'callTimeoutMs NaN',
    { callTimeoutMs: NaN },
    TypeError,
    'callTimeoutMs must be a number at least 0 (0: no timeout), not NaN',
  ],
  [
    'heartbeatIntervalMs Infinity',
    { heartbeatIntervalMs: Infinity },
    RangeError,
    'heartbeatIntervalMs must be an integer from 0 to 2147483647 (0: off), not Infinity',
  ],
  ['callTimeout range', { callTimeout: -1 }, RangeError, 'callTimeout must be a number at least 0'],
  [
    'heartbeatIntervalMs type',
    { heartbeatIntervalMs: true },
    TypeError,
    'heartbeatIntervalMs must be an integer from 0 to 2147483647 (0: off), not true',
  ],
  [
    'heartbeatIntervalMs range',
    { heartbeatIntervalMs: -1 },
    RangeError,
    'heartbeatIntervalMs must be an integer from 0 to 2147483647 (0: off), not -1',
  ],
  [
    'heartbeatIntervalMs past a timer',
    { heartbeatIntervalMs: 2 ** 31 },
    RangeError,
    'heartbeatIntervalMs must be an integer from 0 to 2147483647',
  ],
  [
    'heartbeatInterval range',
    { heartbeatInterval: 1.5 },
    RangeError,
    'heartbeatInterval must be an integer from 0 to 2147483647',
  ],
  [
    'userInbox type',
    { userInbox: 'on', userOf: noop },
    TypeError,
    'userInbox must be true, false or { maxLength, maxAgeMs, holdMs }',
  ],
  ['userInbox without userOf', { userInbox: true }, TypeError, 'userInbox needs userOf'],
  [
    'userInbox key',
    { userInbox: { max: 1 }, userOf: noop },
    TypeError,
    'userInbox.max is not an option of userInbox',
  ],
  [
    'userInbox value',
    { userInbox: { holdMs: 60_001 }, userOf: noop },
    RangeError,
    'userInbox.holdMs must be an integer from 0 to 60000, not 60001',
  ],
  [
    'subscriptionMethods type',
    { subscriptionMethods: 'eth' },
    TypeError,
    'subscriptionMethods must be an object { subscribe, notification, unsubscribe }',
  ],
  [
    'subscriptionMethods key',
    { subscriptionMethods: { subscibe: 'x' } },
    TypeError,
    'subscriptionMethods.subscibe is not an option of subscriptionMethods (did you mean subscriptionMethods.subscribe?)',
  ],
  [
    'subscriptionMethods value type',
    { subscriptionMethods: { subscribe: 1 } },
    TypeError,
    'subscriptionMethods.subscribe must be a method name (a non-empty string), not 1',
  ],
  [
    'subscriptionMethods value empty',
    { subscriptionMethods: { unsubscribe: '' } },
    RangeError,
    'subscriptionMethods.unsubscribe must be a non-empty string',
  ],
  ['metrics', { metrics: 1 }, TypeError, 'metrics must be a boolean, not 1'],
  ['acceptV1', { acceptV1: 'true' }, TypeError, 'acceptV1 must be a boolean'],
  [
    'exposeErrorDetails',
    { exposeErrorDetails: null },
    TypeError,
    'exposeErrorDetails must be a boolean, not null',
  ],
  ['server', { server: {} }, TypeError, 'server must be an http.Server or https.Server'],
  [
    'authenticate',
    { authenticate: 'token' },
    TypeError,
    'authenticate must be a function, not "token"',
  ],
  ['authorize', { authorize: true }, TypeError, 'authorize must be a function'],
  [
    'selectProtocol',
    { selectProtocol: 'jsonrpc-2.0' },
    TypeError,
    'selectProtocol must be a function',
  ],
  [
    'encodings',
    { encodings: ['json', 'protobuf'] },
    TypeError,
    'encodings must be an array of "json", "msgpack", "cbor", not ["json","protobuf"]',
  ],
  [
    'binaryJsonFrames',
    { binaryJsonFrames: 'utf8' },
    RangeError,
    'binaryJsonFrames must be "refuse" or "text", not "utf8"',
  ],
  ['tls', { tls: { cert: 'x' } }, TypeError, 'tls must be an object { cert, key }'],
  ['httpHandler', { httpHandler: {} }, TypeError, 'httpHandler must be a function'],
  ['logger', { logger: console.log }, TypeError, 'logger must be a logger'],
  ['userOf', { userOf: 'sub' }, TypeError, 'userOf must be a function'],
  ['broker', { broker: 'redis' }, TypeError, 'broker must be a Broker'],
  [
    'old and new name differ',
    { callTimeout: 1_000, callTimeoutMs: 2_000 },
    TypeError,
    'callTimeout is the old name of callTimeoutMs: give one of them, not both',
  ],
  [
    'old and new heartbeat differ',
    { heartbeatInterval: 0, heartbeatIntervalMs: 50 },
    TypeError,
    'heartbeatInterval is the old name of heartbeatIntervalMs',
  ],
];

describe('resolveGatewayOptions: the one step that checks createGateway options', () => {
  it.each(refused)(
    'refuses %s, naming the option and what it may be',
    (_, options, error, says) => {
      const refusal = (): unknown => resolveGatewayOptions(options);
      expect(refusal).toThrow(error);
      expect(refusal).toThrow(says);
    },
  );

  it('has a refusal case for every option that takes a value of its own', () => {
    const covered = new Set(refused.map(([, options]) => Object.keys(options)[0]));
    for (const name of Object.keys(gatewayOptionRules)) expect(covered).toContain(name);
  });

  it('createGateway itself throws, before it listens', () => {
    expect(() => createGateway({ heartbeatIntervalMs: -1 })).toThrow(RangeError);
    expect(() => createGateway({ callTimeoutMs: 'x' as unknown as number })).toThrow(
      'callTimeoutMs must be',
    );
    expect(() => createGateway({ heartbeatIntervl: 1 } as never)).toThrow(
      'heartbeatIntervl is not an option of createGateway',
    );
  });

  it('allowedOrigins: an entry no browser sends as its Origin is refused, naming the origin meant', () => {
    const refusal = (entry: string): string => {
      try {
        createGateway({ logger: silentLogger, allowedOrigins: ['https://ok.example', entry] });
      } catch (err) {
        expect(err).toBeInstanceOf(RangeError);
        return (err as Error).message;
      }
      return 'accepted';
    };
    const must = 'must be an origin such as https://app.example (no path, no trailing slash)';
    expect(refusal('https://app.example/')).toBe(
      `allowedOrigins[1] ${must}, not "https://app.example/" (did you mean "https://app.example"?)`,
    );
    expect(refusal('HTTPS://APP.EXAMPLE')).toBe(
      `allowedOrigins[1] ${must}, not "HTTPS://APP.EXAMPLE" (did you mean "https://app.example"?)`,
    );
    expect(refusal('app.example')).toBe(
      `allowedOrigins[1] ${must}, not "app.example" (did you mean "https://app.example"?)`,
    );
    expect(refusal('https://app.example:443/login?x=1')).toBe(
      `allowedOrigins[1] ${must}, not "https://app.example:443/login?x=1" (did you mean "https://app.example"?)`,
    );
    expect(refusal('chrome-extension://abcdef/')).toBe(
      `allowedOrigins[1] ${must}, not "chrome-extension://abcdef/" (did you mean "chrome-extension://abcdef"?)`,
    );
    expect(refusal('*')).toBe(
      'allowedOrigins[1] "*" admits every origin, so it must be the only entry, not one of 2',
    );
    const any = createGateway({ logger: silentLogger, allowedOrigins: ['*'] });
    expect(any.config.http.allowedOrigins).toEqual(['*']);
    void any.close();
    expect(refusal('')).toBe(`allowedOrigins[1] ${must}, not ""`);
    expect(refusal('file:///home/page.html')).toBe(
      `allowedOrigins[1] ${must}, not "file:///home/page.html"`,
    );
    // "null" is what any sandboxed iframe or file: page sends: listed, it would let in any site
    // that frames itself sandboxed. Refused, saying why; a predicate in code can still allow it.
    expect(refusal('null')).toBe(
      'allowedOrigins[1] must not be "null": every sandboxed iframe, file: page and some redirects send Origin: null, so listing it lets in any page that makes itself one (a cross-site page included); to allow it knowingly, pass allowedOrigins a predicate in code',
    );
    expect(() => createGateway({ allowedOrigins: (origin) => origin === 'null' })).not.toThrow();
    // What a browser sends: scheme, host and a port other than the scheme's; an app's or an
    // extension's own scheme.
    for (const origin of [
      'https://app.example',
      'http://localhost:3000',
      'https://[::1]:8443',
      'https://xn--bcher-kva.example',
      'capacitor://localhost',
      'chrome-extension://abcdef',
    ]) {
      expect(refusal(origin), origin).toBe('accepted');
    }
  });

  it('a long refused value is cut to 200 characters, with an ellipsis', () => {
    const long = '/'.repeat(10) + 'x'.repeat(100_000);
    expect(() => createGateway({ path: 'rpc'.repeat(50_000) })).toThrow(
      `path must start with "/", not "${'rpc'.repeat(66)}r...`,
    );
    expect(() => createGateway({ routes: { livez: 'x'.repeat(100_000) } })).toThrow(
      new RegExp(`^routes\\.livez must start with "/", not "x{199}\\.\\.\\.$`),
    );
    expect(() => createGateway({ limits: { maxBatch: long as unknown as number } })).toThrow(
      `limits.maxBatch must be a number, not "${long.slice(0, 199)}...`,
    );
  });

  it('fills every default in, from gatewayDefaults', () => {
    const config = resolveGatewayOptions({ logger: silentLogger });
    expect(config.http).toMatchObject({
      path: gatewayDefaults.path,
      routes: { ...gatewayDefaults.routes, rpc: gatewayDefaults.path },
      trustedProxies: [],
      server: undefined,
    });
    expect(config.limits).toEqual(defaultLimits);
    expect(config.limitsSet).toEqual([]);
    expect(config.timing).toEqual({ callTimeoutMs: 30_000, heartbeatIntervalMs: 30_000 });
    expect(config.pubsub).toEqual({
      broker: undefined,
      subscriptionMethods: gatewayDefaults.subscriptionMethods,
      userInbox: undefined,
      refuseWhileBrokerDown: true,
      clusterEvents: undefined,
      presence: {
        leaseMs: gatewayDefaults.presenceLeaseMs,
        coalesceMs: gatewayDefaults.presenceCoalesceMs,
      },
    });
    expect(config.protocol).toEqual({ acceptV1: false, exposeErrorDetails: false });
    expect(config.observability).toEqual({ logger: silentLogger, metrics: true });
  });

  it('takes a JSON document as it is (what a configuration file holds)', () => {
    const file = JSON.parse(
      '{"path":"/ws","heartbeatIntervalMs":0,"limits":{"maxBatch":10},"routes":{"metrics":false}}',
    ) as unknown;
    const config = resolveGatewayOptions(file);
    expect(config.http.path).toBe('/ws');
    expect(config.http.routes.metrics).toBe(false);
    expect(config.limits.maxBatch).toBe(10);
    expect(config.limitsSet).toEqual(['maxBatch']);
    expect(config.timing.heartbeatIntervalMs).toBe(0);
  });

  it('is frozen all the way down, but leaves the objects it was given alone', () => {
    const server = createServer();
    const logger = { ...silentLogger };
    const config = resolveGatewayOptions({
      server,
      logger,
      trustedProxies: ['10.0.0.0/8'],
      userInbox: true,
      userOf: noop,
    });
    expect(Object.isFrozen(config)).toBe(true);
    for (const group of Object.values(config)) expect(Object.isFrozen(group)).toBe(true);
    expect(Object.isFrozen(config.limits)).toBe(true);
    expect(Object.isFrozen(config.http.routes)).toBe(true);
    expect(Object.isFrozen(config.http.trustedProxies)).toBe(true);
    expect(Object.isFrozen(config.pubsub.userInbox?.retention)).toBe(true);
    expect(Object.isFrozen(server)).toBe(false);
    expect(Object.isFrozen(logger)).toBe(false);
    expect(Object.isFrozen(gatewayDefaults)).toBe(true);
    expect(Object.isFrozen(gatewayDefaults.limits)).toBe(true);
  });

  it('takes the old names as aliases of the new ones', () => {
    const config = resolveGatewayOptions({ callTimeout: 1_000, heartbeatInterval: 0 });
    expect(config.timing).toEqual({ callTimeoutMs: 1_000, heartbeatIntervalMs: 0 });
    // The same value under both names is no conflict.
    expect(resolveGatewayOptions({ callTimeout: 5, callTimeoutMs: 5 }).timing.callTimeoutMs).toBe(
      5,
    );
  });

  it('exposes the resolved config on the gateway', async () => {
    const gateway = createGateway({
      logger: silentLogger,
      heartbeatIntervalMs: 0,
      limits: { maxBatch: 7 },
    });
    try {
      expect(gateway.config.timing.heartbeatIntervalMs).toBe(0);
      expect(gateway.config.limits.maxBatch).toBe(7);
      expect(Object.isFrozen(gateway.config)).toBe(true);
    } finally {
      await gateway.close();
    }
  });
});

describe('trustedProxies with a /0 subnet', () => {
  it('makes the gateway with a warning per such entry (every peer believed); proxies named: none', async () => {
    const warningsOf = async (trustedProxies: string[]): Promise<string[]> => {
      const { logger, records } = captureLogger();
      const gateway = createGateway({ logger, trustedProxies });
      await gateway.close();
      return records
        .filter((record) => record.level === 'warn')
        .map((record) => String(record.msg));
    };
    expect(await warningsOf(['10.0.0.0/8', '0.0.0.0/0', '::/0'])).toEqual(
      ['0.0.0.0/0', '::/0'].map(
        (entry) =>
          `trustedProxies: "${entry}" trusts every peer's X-Forwarded-For, so any client can claim any address (per-address limits, rate buckets, logs); list the proxies' own addresses or subnets`,
      ),
    );
    expect(await warningsOf(['10.0.0.0/8', 'fd00::/8', '0.0.0.0/1'])).toEqual([]);
  });
});
