// A configuration file for `wsrpc-gateway serve`: loading (YAML or JSON, ${ENV} substitution,
// syntax errors with their line and column) and checking (every section, the library's data
// options with createGateway's own messages, unknown keys).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigFileError, loadConfigFile } from '../../src/standalone/config-file.js';
import {
  examineStandaloneConfig,
  resolveStandaloneConfig,
} from '../../src/standalone/standalone-config.js';
import { resolveGatewayOptions } from '../../src/server/gateway-config.js';

const dir = mkdtempSync(join(tmpdir(), 'config-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
function file(name: string, text: string): string {
  const path = join(dir, `${files++}-${name}`);
  writeFileSync(path, text);
  return path;
}

/** The error `load` rejects with. */
async function loadError(path: string, env: Record<string, string> = {}): Promise<ConfigFileError> {
  const err = await loadConfigFile(path, env).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigFileError);
  return err as ConfigFileError;
}

const SECRET = 'a-secret-of-at-least-thirty-two-bytes!';

describe('loadConfigFile', () => {
  it('reads YAML and JSON by extension', async () => {
    const yaml = file('a.yaml', 'path: /ws\nlimits:\n  maxBatch: 5\n');
    const json = file('a.json', '{"path": "/ws", "limits": {"maxBatch": 5}}');
    const expected = { path: '/ws', limits: { maxBatch: 5 } };
    expect(await loadConfigFile(yaml, {})).toEqual(expected);
    expect(await loadConfigFile(json, {})).toEqual(expected);
    expect(await loadConfigFile(file('b.yml', 'path: /ws\n'), {})).toEqual({ path: '/ws' });
  });

  it('substitutes ${NAME} and ${NAME:-default} in string values, $${ as a literal', async () => {
    const path = file(
      'env.yaml',
      [
        'jwt:',
        '  secret: "${SECRET}"',
        'broker:',
        '  kind: redis',
        '  url: redis://${REDIS_HOST:-127.0.0.1}:6379',
        'listen:',
        '  port: ${PORT:-8080}',
        '  host: "${HOST:-0.0.0.0}"',
        '  tcpPort: "${TCP_PORT:-9000}"',
        'path: /$${literal}',
        '',
      ].join('\n'),
    );
    expect(await loadConfigFile(path, { SECRET, PORT: '9090', REDIS_HOST: '' })).toEqual({
      jwt: { secret: SECRET },
      broker: { kind: 'redis', url: 'redis://127.0.0.1:6379' },
      // An unquoted whole reference is read as YAML (a number here); a quoted one stays a string.
      listen: { port: 9090, host: '0.0.0.0', tcpPort: '9000' },
      path: '/${literal}',
    });
  });

  it('in JSON every substituted value stays a string', async () => {
    const path = file('env.json', '{"listen": {"port": "${PORT}"}, "jwt": {"secret": "${S}"}}');
    expect(await loadConfigFile(path, { PORT: '1', S: SECRET })).toEqual({
      listen: { port: '1' },
      jwt: { secret: SECRET },
    });
  });

  it('a variable that is not set is an error naming it and its path in the file, each one', async () => {
    const path = file(
      'missing.yaml',
      'serverApi:\n  keys: ["${API_KEY}", "${OTHER}"]\njwt:\n  secret: ${JWT_SECRET}\n',
    );
    const err = await loadError(path, { OTHER: 'x' });
    expect(err.kind).toBe('env');
    expect(err.message.split('\n')).toEqual([
      `${path}: serverApi.keys[0]: environment variable API_KEY is not set (set it, or give a default: \${API_KEY:-value})`,
      `${path}: jwt.secret: environment variable JWT_SECRET is not set (set it, or give a default: \${JWT_SECRET:-value})`,
    ]);
  });

  it('a malformed reference is refused', async () => {
    const err = await loadError(file('bad-ref.yaml', 'path: "/${1X}"\n'));
    expect(err.kind).toBe('env');
    expect(err.message).toContain('path: "${1X}" is not a variable reference');
  });

  it('a YAML syntax error names the line and column', async () => {
    const path = file('syntax.yaml', 'path: /rpc\nlimits:\n  maxBatch: [1, 2\nlisten: {}\n');
    const err = await loadError(path);
    expect(err.kind).toBe('parse');
    expect(err.message).toMatch(new RegExp(`^${path.replace(/[.\\]/g, '\\$&')}:\\d+:\\d+: `));
    const dup = await loadError(file('dup.yaml', 'path: /a\npath: /b\n'));
    expect(dup.message).toMatch(/:2:1: Map keys must be unique/);
  });

  it('a JSON syntax error names the line and column', async () => {
    const err = await loadError(file('syntax.json', '{\n  "path": "/rpc",\n  "limits": }\n'));
    expect(err.kind).toBe('parse');
    expect(err.message).toMatch(/:3:13: /);
    const early = await loadError(file('early.json', '{"path": "/rpc",'));
    expect(early.message).toMatch(/:1:17: /);
    const escape = await loadError(file('escape.json', '{\n"a": "\\x"}'));
    expect(escape.message).toMatch(/:2:8: /);
  });

  it('a file it cannot read, or of another kind, is a read error', async () => {
    const missing = await loadError(join(dir, 'nope.yaml'));
    expect(missing.kind).toBe('read');
    expect(missing.message).toContain('cannot read');
    const other = await loadError(file('config.toml', 'a = 1'));
    expect(other.kind).toBe('read');
    expect(other.message).toContain('YAML (.yaml, .yml) or JSON (.json), not .toml');
  });

  it('bounds YAML aliases', async () => {
    const lines = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 0; i < 120; i++) lines.push(`k${i}: *a`);
    const err = await loadError(file('aliases.yaml', lines.join('\n')));
    expect(err.kind).toBe('parse');
    expect(err.message).toMatch(/alias/i);
  });
});

/** The first problem resolveStandaloneConfig throws for `value`. */
function refusal(value: unknown): Error {
  try {
    resolveStandaloneConfig(value, 'gateway.yaml');
  } catch (err) {
    return err as Error;
  }
  throw new Error(`accepted: ${JSON.stringify(value)}`);
}

describe('resolveStandaloneConfig', () => {
  it('an empty file is a memory gateway on 0.0.0.0:8080 with the library defaults', () => {
    const config = resolveStandaloneConfig(null);
    expect(config.listen).toEqual({ host: '0.0.0.0', port: 8080, tcpPort: undefined });
    expect(config.broker).toEqual({ kind: 'memory' });
    expect(config.gateway).toEqual({});
    expect(config.upstreams).toBeUndefined();
    expect(config.tracing.enabled).toBe(false);
  });

  it('takes the transport data options: compression, encodings, binary JSON frames, presence, cluster events', () => {
    const options = {
      perMessageDeflate: { threshold: 512 },
      encodings: ['json', 'msgpack'],
      binaryJsonFrames: 'text',
      presenceLeaseMs: 20_000,
      presenceCoalesceMs: 100,
      clusterEvents: true,
    };
    expect(resolveStandaloneConfig(options).gateway).toEqual(options);
    const problems = examineStandaloneConfig({ binaryJsonFrames: 'binary', encodings: ['xml'] })
      .problems.map((p) => p.message)
      .join('\n');
    expect(problems).toMatch(/binaryJsonFrames/);
    expect(problems).toMatch(/encodings/);
  });

  it('tells a problem once when two sections find it (the upstreams, resolved again by the hooks)', () => {
    const { problems } = examineStandaloneConfig({
      upstreams: { n: { nats: { url: 'nats://127.0.0.1:4222', subject: 'a.>' } } },
      hooks: { connect: { upstream: 'n' } },
    });
    expect(problems.map((p) => p.message)).toEqual([
      'upstreams.n.nats.subject must be a NATS subject without wildcards or spaces, not "a.>"',
    ]);
  });

  it('resolves a complete file', () => {
    const config = resolveStandaloneConfig({
      path: '/ws',
      limits: { maxConnections: 100 },
      identity: { inBand: true },
      userInbox: true,
      listen: { host: '127.0.0.1', port: 0, tcpPort: 9000 },
      tls: { certFile: 'c.pem', keyFile: 'k.pem' },
      broker: { kind: 'redis', url: 'redis://127.0.0.1:6379', prefix: 'gw' },
      topics: { 'chat.*': { history: { maxLength: 10 }, slowConsumer: 'keep-latest' } },
      jwt: { secret: SECRET, issuer: 'me' },
      static: { dir: './web' },
      shutdown: { drainDeadlineMs: 500 },
      upstreams: { orders: { url: 'http://127.0.0.1:9001/rpc' } },
      methods: { 'orders.*': 'orders' },
    });
    expect(config.gateway).toEqual({
      path: '/ws',
      limits: { maxConnections: 100 },
      identity: { inBand: true },
      userInbox: true,
    });
    expect(config.broker).toEqual({ kind: 'redis', url: 'redis://127.0.0.1:6379', prefix: 'gw' });
    expect(
      resolveStandaloneConfig({ broker: { kind: 'nats', historyStorage: 'memory' } }).broker,
    ).toEqual({
      kind: 'nats',
      url: undefined,
      prefix: undefined,
      historyStorage: 'memory',
    });
    expect(config.topics['chat.*']).toEqual({
      history: { maxLength: 10 },
      slowConsumer: 'keep-latest',
      highWaterMark: undefined,
      presence: undefined,
    });
    // Presence: true, or its maxListed (info takes a function: code, not a file).
    const presence = (value: unknown) =>
      resolveStandaloneConfig({ topics: { 'room.*': { presence: value } } }).topics['room.*']!
        .presence;
    expect(presence(true)).toBe(true);
    expect(presence(false)).toBeUndefined();
    expect(presence({ maxListed: 10 })).toEqual({ maxListed: 10 });
    expect(() => presence({ maxListed: 0 })).toThrow(
      'topics.room.*.presence.maxListed must be an integer from 1 to 1000, not 0',
    );
    expect(() => presence({ info: 'user' })).toThrow(
      'topics.room.*.presence.info is not an option of topics.room.*.presence',
    );
    expect(() => presence('yes')).toThrow('topics.room.*.presence must be true or an object');
    expect(config.upstreams?.routes).toHaveLength(1);
    expect(config.shutdown.drainDeadlineMs).toBe(500);
  });

  it('refuses an unknown top-level key, naming the file and the nearest key', () => {
    expect(refusal({ topcs: {} })).toEqual(
      new TypeError('topcs is not an option of gateway.yaml (did you mean topics?)'),
    );
    // Code options of createGateway are not data: a file cannot hold them.
    expect(refusal({ authenticate: 'x' }).message).toBe(
      'authenticate is not an option of gateway.yaml',
    );
    expect(refusal({ callTimeout: 5 }).message).toMatch(/^callTimeout is not an option/);
  });

  it('refuses a file that is not an object', () => {
    expect(refusal([1])).toEqual(
      new TypeError('gateway.yaml must be an object of options and sections, not [1]'),
    );
  });

  // The library's data options: refused with createGateway's own message for the same value.
  const libraryCases: [string, unknown][] = [
    ['path', 'rpc'],
    ['path', 5],
    ['routes', { livez: 'x' }],
    ['routes', { nope: '/n' }],
    ['allowedOrigins', 'https://a.example'],
    ['trustedProxies', ['not an address']],
    ['refuseWhileBrokerDown', 'yes'],
    ['limits', { maxBatch: 0 }],
    ['limits', { maxBatch: '5' }],
    ['limits', { maxBatchh: 5 }],
    ['limits', 7],
    ['callTimeoutMs', -1],
    ['heartbeatIntervalMs', 1.5],
    ['subscriptionMethods', { subscribe: '' }],
    ['subscriptionMethods', { other: 'x' }],
    ['metrics', 1],
    ['acceptV1', 'no'],
    ['exposeErrorDetails', null],
    ['identity', { inBandDeadlineMs: 10 }],
    ['identity', 'x'],
  ];
  for (const [key, value] of libraryCases) {
    it(`${key}: ${JSON.stringify(value)} is refused as createGateway refuses it`, () => {
      let expected: unknown;
      try {
        resolveGatewayOptions({ [key]: value });
      } catch (err) {
        expected = err;
      }
      expect(expected).toBeInstanceOf(Error);
      expect(refusal({ [key]: value })).toEqual(expected);
    });
  }

  it('userInbox with a user from jwt or the connect hook (the inbox is per user), else refused', () => {
    expect(refusal({ userInbox: { maxLength: 0 }, jwt: { secret: SECRET } }).message).toBe(
      'userInbox.maxLength must be an integer from 1 to 100000, not 0',
    );
    expect(refusal({ userInbox: true }).message).toBe(
      'userInbox needs a user for each session: set jwt, or hooks.connect (which names the user)',
    );
  });

  it('hooks through their resolver; jwt and the connect hook are not both taken', () => {
    const upstreams = { auth: { url: 'http://127.0.0.1:9/rpc' } };
    const config = resolveStandaloneConfig({
      upstreams,
      hooks: { connect: { upstream: 'auth' } },
      userInbox: true,
    });
    expect(config.hooks?.connect?.upstream.name).toBe('auth');
    expect(refusal({ upstreams, hooks: { connect: { upstream: 'nope' } } }).message).toMatch(
      /^hooks\.connect\.upstream must name an HTTP upstream/,
    );
    expect(
      refusal({ upstreams, jwt: { secret: SECRET }, hooks: { connect: { upstream: 'auth' } } })
        .message,
    ).toBe(
      'jwt and hooks.connect both decide who may connect: give one of them (the connect hook can verify the token itself)',
    );
  });

  it("identity's hooks are code: jwt or the connect hook give them, a file cannot", () => {
    expect(refusal({ identity: { expiresAtOf: 'x' } }).message).toBe(
      'identity.expiresAtOf is not an option of identity in a configuration file',
    );
  });

  // The standalone server's own sections.
  const sectionCases: [unknown, Error][] = [
    [{ listen: 8080 }, new TypeError('listen must be an object, not 8080')],
    [
      { listen: { port: 70000 } },
      new RangeError(
        'listen.port must be an integer from 0 to 65535 (0: any free port), not 70000',
      ),
    ],
    [
      { listen: { tcpPort: 'x' } },
      new TypeError(
        'listen.tcpPort must be an integer from 0 to 65535 (0: any free port), not "x"',
      ),
    ],
    [{ listen: { host: '' } }, new TypeError('listen.host must be a non-empty string, not ""')],
    [
      { listen: { hots: 'x' } },
      new TypeError('listen.hots is not an option of listen (did you mean listen.host?)'),
    ],
    [
      { tls: { certFile: 'c.pem' } },
      new TypeError('tls.keyFile must be a file name (PEM), not undefined'),
    ],
    [{ tls: { cert: 'x' } }, new TypeError('tls.cert is not an option of tls')],
    [
      { broker: { kind: 'kafka' } },
      new RangeError('broker.kind must be "memory" or "redis" or "nats", not "kafka"'),
    ],
    [
      { broker: { url: 'redis://x' } },
      new TypeError('broker.url is for kind redis or nats, not for kind memory'),
    ],
    [
      { broker: { kind: 'redis', url: 'http://x' } },
      new RangeError('broker.url must be a redis:// or rediss:// URL, not "http://x"'),
    ],
    [
      { broker: { kind: 'nats', url: 'redis://x' } },
      new RangeError('broker.url must be a nats:// or tls:// URL, not "redis://x"'),
    ],
    [
      { broker: { kind: 'nats', historyStorage: 'disk' } },
      new RangeError('broker.historyStorage must be "file" or "memory", not "disk"'),
    ],
    [
      { broker: { kind: 'redis', historyStorage: 'memory' } },
      new TypeError('broker.historyStorage is for kind nats, not for kind redis'),
    ],
    [
      { topics: [] },
      new TypeError(
        'topics must be an object of topic patterns, such as { "chat.*": { history: { maxLength: 100 } } }, not []',
      ),
    ],
    [
      { topics: { $x: {} } },
      new RangeError(
        'topics.$x: a topic pattern is a name or a prefix ending in "*", not starting with "$"',
      ),
    ],
    [
      { topics: { 'a.*': { slowConsumer: 'wait' } } },
      new RangeError(
        'topics.a.*.slowConsumer must be "drop" or "keep-latest" or "disconnect", not "wait"',
      ),
    ],
    [
      { topics: { a: { history: { maxAgeMs: 0 } } } },
      new RangeError('topics.a.history.maxAgeMs must be an integer from 1 to 2147483647, not 0'),
    ],
    [
      { topics: { a: { histroy: {} } } },
      new TypeError(
        'topics.a.histroy is not an option of topics.a (did you mean topics.a.history?)',
      ),
    ],
    [{ static: {} }, new TypeError('static.dir must be a folder name, not undefined')],
    [
      { shutdown: { drainDeadlineMs: -1 } },
      new RangeError('shutdown.drainDeadlineMs must be an integer from 0 to 2147483647, not -1'),
    ],
    [
      { jwt: { secret: 'short' } },
      new RangeError('jwt.secret must be at least 32 bytes (256 bits, RFC 7518), not shorter'),
    ],
    [
      { jwt: {} },
      new TypeError('jwt: jwtAuth needs exactly one of secret, publicKey, jwks, jwksUrl'),
    ],
    [
      { jwt: { secret: SECRET, issur: 'x' } },
      new TypeError('jwt.issur is not an option of jwtAuth (did you mean issuer?)'),
    ],
    [
      { upstreams: { orders: { url: 'http://x/rpc', timeoutMs: -5 } } },
      new RangeError('upstreams.orders.timeoutMs must be an integer from 1 to 2147483647, not -5'),
    ],
    [
      { serverApi: { listen: { port: 1 }, keys: ['short'] } },
      new RangeError('serverApi.keys[0] must be a string of at least 16 characters, not one of 5'),
    ],
    [
      { tracing: { enabled: 'yes' } },
      new TypeError('tracing.enabled must be a boolean, not "yes"'),
    ],
  ];
  for (const [value, expected] of sectionCases) {
    it(`refuses ${JSON.stringify(value)}`, () => {
      const err = refusal(value);
      expect(err.constructor).toBe(expected.constructor);
      expect(err.message).toBe(expected.message);
    });
  }

  it('collects a problem from each section, the library options one by one', () => {
    const { config, problems } = examineStandaloneConfig(
      {
        path: 'x',
        limits: { maxBatch: 0 },
        listen: { port: -1 },
        broker: { kind: 'x' },
        lisen: {},
        jwt: { secret: 'short' },
        tracing: { enabled: 1 },
      },
      'gateway.yaml',
    );
    expect(config).toBeUndefined();
    expect(problems.map((p) => p.message.split(' ')[0])).toEqual([
      'lisen',
      'path',
      'limits.maxBatch',
      'listen.port',
      'broker.kind',
      'jwt.secret',
      'tracing.enabled',
    ]);
  });
});
