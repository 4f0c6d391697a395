// `wsrpc-gateway check-config FILE` as a user runs it: the built CLI (`npm run build` first) in a
// child process, its exit code and what it prints.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { makeSelfSignedCertificate } from '../support/tls.js';

/** What a file listing "null" in allowedOrigins[1] is told (resolveGatewayOptions' message). */
const NULL_ORIGIN_REFUSAL =
  'allowedOrigins[1] must not be "null": every sandboxed iframe, file: page and some redirects send Origin: null, so listing it lets in any page that makes itself one (a cross-site page included); to allow it knowingly, pass allowedOrigins a predicate in code';

const cli = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'check-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

function run(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [cli, ...args], {
    encoding: 'utf8',
    timeout: 20_000,
    env: { ...process.env, ...env },
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('wsrpc-gateway check-config', () => {
  it('a valid file: "ok", a one-line summary, exit 0', () => {
    const path = file(
      'good.yaml',
      [
        'path: /rpc',
        'limits: { maxConnections: 100 }',
        'listen:',
        '  port: ${PORT:-8080}',
        'broker: { kind: redis, url: "${REDIS_URL:-redis://127.0.0.1:6379}" }',
        'topics: { "chat.*": { history: { maxLength: 100 } } }',
        'upstreams: { orders: { url: "http://127.0.0.1:9001/rpc" } }',
        'methods: { "orders.*": orders }',
        '',
      ].join('\n'),
    );
    const { code, stdout, stderr } = run(['check-config', path], { PORT: '9090' });
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toBe(
      `ok: ${path}: listens on 0.0.0.0:9090, path /rpc, broker redis, 1 topic, identity none, 1 upstream (1 route), tracing off\n`,
    );
  });

  it('every problem it finds with its path in the file, exit 1', () => {
    const path = file(
      'bad.yaml',
      [
        'path: rpc',
        'limits: { maxBatch: 0 }',
        'listen: { port: 70000 }',
        'topcs: {}',
        'upstreams: { orders: { url: "http://x/rpc", timeoutMs: -5 } }',
        '',
      ].join('\n'),
    );
    const { code, stdout, stderr } = run(['check-config', path]);
    expect(code).toBe(1);
    expect(stdout).toBe('');
    expect(stderr.trimEnd().split('\n')).toEqual([
      `${path}: topcs is not an option of ${path} (did you mean topics?)`,
      `${path}: path must start with "/", not "rpc"`,
      `${path}: limits.maxBatch must be an integer at least 1, not 0`,
      `${path}: listen.port must be an integer from 0 to 65535 (0: any free port), not 70000`,
      `${path}: upstreams.orders.timeoutMs must be an integer from 1 to 2147483647, not -5`,
      `${path}: 5 problems`,
    ]);
  });

  it('a variable that is not set: exit 1, naming it and where', () => {
    const path = file('env.yaml', 'jwt:\n  secret: ${JWT_SECRET_FOR_THIS_TEST}\n');
    const { code, stderr } = run(['check-config', path]);
    expect(code).toBe(1);
    expect(stderr).toContain(
      `${path}: jwt.secret: environment variable JWT_SECRET_FOR_THIS_TEST is not set`,
    );
  });

  it('a file it cannot parse: exit 2 with the line and column', () => {
    const path = file('syntax.yaml', 'path: /rpc\nlimits:\n  maxBatch: [1, 2\n');
    const { code, stderr } = run(['check-config', path]);
    expect(code).toBe(2);
    expect(stderr).toMatch(new RegExp(`^${path.replace(/[.\\]/g, '\\$&')}:\\d+:\\d+: `));
  });

  it('a duplicate key, in JSON as in YAML: exit 2 with its line and column', () => {
    const json = file('dup.json', '{"listen": {"port": 18201, "port": 18202}}');
    const fromJson = run(['check-config', json]);
    expect(fromJson.code).toBe(2);
    expect(fromJson.stdout).toBe('');
    expect(fromJson.stderr).toBe(
      `${json}:1:28: Object keys must be unique, "port" repeats an earlier key (DUPLICATE_KEY)\n`,
    );
    const yaml = file('dup.yaml', 'listen:\n  port: 18201\n  port: 18202\n');
    const fromYaml = run(['check-config', yaml]);
    expect(fromYaml.code).toBe(2);
    expect(fromYaml.stderr).toBe(`${yaml}:3:3: Map keys must be unique (DUPLICATE_KEY)\n`);
  });

  it('a key that is a list or a map: exit 2 at its line and column, no warning of the yaml package', () => {
    const path = file('collection-key.yaml', 'listen:\n  ? [a, b]\n  : 1\n  ? { c: d }\n  : 2\n');
    const { code, stderr } = run(['check-config', path]);
    expect(code).toBe(2);
    expect(stderr).toBe(
      `${path}:2:5: a key is a list: a key of a configuration file is a name, never an alias, a list or a map\n`,
    );
  });

  it('allowedOrigins: an entry that is not an origin, exit 1, naming the origin meant', () => {
    const path = file(
      'origins.yaml',
      'allowedOrigins: ["https://app.example", "https://app.example/"]\n',
    );
    const { code, stdout, stderr } = run(['check-config', path]);
    expect(code).toBe(1);
    expect(stdout).toBe('');
    expect(stderr.trimEnd().split('\n')).toEqual([
      `${path}: allowedOrigins[1] must be an origin such as https://app.example (no path, no trailing slash), not "https://app.example/" (did you mean "https://app.example"?)`,
      `${path}: 1 problem`,
    ]);
  });

  it('allowedOrigins: "null" is refused, saying why (any sandboxed or file: page sends it), exit 1', () => {
    const path = file('null-origin.yaml', 'allowedOrigins: ["https://app.example", "null"]\n');
    const { code, stdout, stderr } = run(['check-config', path]);
    expect(code).toBe(1);
    expect(stdout).toBe('');
    expect(stderr.trimEnd().split('\n')).toEqual([
      `${path}: ${NULL_ORIGIN_REFUSAL}`,
      `${path}: 1 problem`,
    ]);
  });

  it('a TLS file serve would refuse is a problem here too, naming its key; usable files pass', () => {
    const certificate = makeSelfSignedCertificate();
    certificate.remove();
    file('good-cert.pem', certificate.cert);
    file('good-key.pem', certificate.key);
    file('not-pem.txt', 'not a certificate\n');
    const bad = file('tls-bad.yaml', 'tls: { certFile: not-pem.txt, keyFile: good-key.pem }\n');
    const refused = run(['check-config', bad]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^.*tls-bad\.yaml: tls\.certFile: cannot use not-pem\.txt: /);
    const good = file('tls-good.yaml', 'tls: { certFile: good-cert.pem, keyFile: good-key.pem }\n');
    expect(run(['check-config', good])).toMatchObject({ code: 0, stderr: '' });
  });

  it('a static.dir serve would refuse is a problem here too, in the words serve logs it', () => {
    file('not-a-folder.txt', 'text\n');
    const cases = [
      ['static-missing.yaml', 'no-such-web', /^static\.dir: cannot read no-such-web: ENOENT: /],
      ['static-file.yaml', 'not-a-folder.txt', /^static\.dir: not-a-folder\.txt is not a folder$/],
    ] as const;
    for (const [name, dir, message] of cases) {
      const path = file(name, `listen: { host: 127.0.0.1, port: 0 }\nstatic: { dir: ${dir} }\n`);
      const checked = run(['check-config', path]);
      expect(checked.code).toBe(1);
      expect(checked.stdout).toBe('');
      const [problem, count, ...rest] = checked.stderr.split('\n');
      expect(problem!.slice(`${path}: `.length)).toMatch(message);
      expect([count, ...rest]).toEqual([`${path}: 1 problem`, '']);
      // serve refuses the same folder at start (exit 1), logging the same message.
      const served = run(['serve', '--config', path]);
      expect(served.code).toBe(1);
      const logged = served.stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => (JSON.parse(line) as { err?: { message?: string } }).err?.message)
        .filter((text) => text !== undefined);
      expect(logged).toEqual([problem!.slice(`${path}: `.length)]);
    }
    const web = join(dir, 'web');
    mkdirSync(web, { recursive: true });
    writeFileSync(join(web, 'index.html'), 'page');
    const good = file('static-good.yaml', 'static: { dir: web }\n');
    expect(run(['check-config', good])).toMatchObject({ code: 0, stderr: '' });
  });

  it('a number JSON has no word for is shown as JavaScript writes it: Infinity, NaN, not null', () => {
    const yaml = file(
      'inf.yaml',
      'shutdown: { drainDeadlineMs: .inf }\nlimits: { maxBatch: .nan }\n',
    );
    expect(run(['check-config', yaml]).stderr.trimEnd().split('\n')).toEqual([
      `${yaml}: limits.maxBatch must be a number, not NaN`,
      `${yaml}: shutdown.drainDeadlineMs must be an integer from 0 to 2147483647, not Infinity`,
      `${yaml}: 2 problems`,
    ]);
    const json = file('inf.json', '{"shutdown": {"drainDeadlineMs": -1e400}}');
    const { code, stderr } = run(['check-config', json]);
    expect(code).toBe(1);
    expect(stderr).toContain(
      `${json}: shutdown.drainDeadlineMs must be an integer from 0 to 2147483647, not -Infinity\n`,
    );
  });

  it('a long value or key is cut to 200 characters in its message, with an ellipsis', () => {
    const long = (c: string): string => c.repeat(100_000);
    const path = file('long.yaml', `path: "${long('A')}"\n? ${long('B')}\n: 1\n`);
    const { code, stderr } = run(['check-config', path]);
    expect(code).toBe(1);
    const lines = stderr.trimEnd().split('\n');
    expect(lines).toEqual([
      expect.stringMatching(
        new RegExp(`^${path}: ${'B'.repeat(200)}\\.\\.\\. is not an option of `),
      ),
      `${path}: path must start with "/", not "${'A'.repeat(199)}...`,
      `${path}: 2 problems`,
    ]);
    for (const line of lines) expect(line.length).toBeLessThan(path.length * 3 + 300);
    const reference = file('reference.yaml', `jwt: { secret: "\${${long('C')}" }\n`);
    const malformed = run(['check-config', reference]);
    expect(malformed.code).toBe(1);
    expect(malformed.stderr).toBe(
      `${reference}: jwt.secret: "\${${'C'.repeat(197)}... is not a variable reference: use \${NAME} or \${NAME:-default}, or $\${ for a literal \${\n`,
    );
  });

  it('a LOG_LEVEL serve would refuse: exit 1 naming it as serve does, the file checked too', () => {
    const levels = 'trace, debug, info, warn, error, fatal, silent';
    const good = file('log-level.yaml', 'listen: { host: 127.0.0.1, port: 0 }\n');
    for (const level of ['verbose', 'INFO']) {
      const { code, stdout, stderr } = run(['check-config', good], { LOG_LEVEL: level });
      expect(code).toBe(1);
      expect(stdout).toBe('');
      expect(stderr).toBe(
        `wsrpc-gateway check-config: LOG_LEVEL must be one of ${levels}, not "${level}"\n`,
      );
    }
    // The file is still checked: every problem is printed in one run.
    const bad = file('log-level-bad.yaml', 'path: rpc\n');
    const both = run(['check-config', bad], { LOG_LEVEL: 'verbose' });
    expect(both.code).toBe(1);
    expect(both.stderr).toBe(
      [
        `wsrpc-gateway check-config: LOG_LEVEL must be one of ${levels}, not "verbose"`,
        `${bad}: path must start with "/", not "rpc"`,
        `${bad}: 1 problem`,
        '',
      ].join('\n'),
    );
    // Empty is unset (info), as for serve.
    const empty = run(['check-config', good], { LOG_LEVEL: '' });
    expect(empty.stderr).toBe('');
    expect(empty.code).toBe(0);
  });

  it('a file it cannot read, or no file: exit 2', () => {
    const missing = run(['check-config', join(dir, 'nope.yaml')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('cannot read');
    const none = run(['check-config']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('check-config takes one FILE');
    const serve = run(['serve'], { WSRPC_CONFIG: '' });
    expect(serve.code).toBe(2);
    expect(serve.stderr).toContain('serve needs --config FILE (or WSRPC_CONFIG=FILE)');
  });

  it('trustedProxies with a /0 subnet: "ok" and exit 0, with a warning line on stderr', () => {
    const path = file('every-proxy.yaml', 'trustedProxies: ["10.0.0.0/8", "::/0"]\n');
    const { code, stdout, stderr } = run(['check-config', path]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^ok: /);
    expect(stderr).toBe(
      `${path}: warning: trustedProxies: "::/0" trusts every peer's X-Forwarded-For, so any client can claim any address (per-address limits, rate buckets, logs); list the proxies' own addresses or subnets\n`,
    );
  });

  it('a FIFO or a folder given as the file: exit 2 at once, never opened to wait on a writer', () => {
    const fifo = join(dir, 'fifo.yaml');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const folder = join(dir, 'folder.yaml');
    mkdirSync(folder);
    for (const [path, what] of [
      [fifo, 'a FIFO'],
      [folder, 'a folder'],
    ] as const) {
      const refusal = `cannot read ${path}: it is ${what}, not a regular file\n`;
      // Without the fix, reading the FIFO waits for a writer: run's timeout ends it, no exit code.
      expect(run(['check-config', path])).toEqual({ code: 2, stdout: '', stderr: refusal });
      expect(run(['serve', '--config', path])).toEqual({ code: 2, stdout: '', stderr: refusal });
    }
  });

  it('the help names both commands', () => {
    const { code, stdout } = run(['--help']);
    expect(code).toBe(0);
    expect(stdout).toContain('wsrpc-gateway serve --config FILE');
    expect(stdout).toContain('wsrpc-gateway check-config FILE');
  });
});
