import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { withRedis } from './brokers.js';
import type { Cluster } from './cluster.js';
import { canConnect } from './network.js';
import { waitFor } from './waiting.js';

export function hasProgram(program: string, args = ['--version']): boolean {
  return spawnSync(program, args, { stdio: 'ignore' }).status === 0;
}

/** A redis-server on `port`, without persistence, tracked by `cluster`; resolves once it answers. */
export async function startRedisServer(
  cluster: Cluster,
  port: number,
  dir: string,
): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const output = cluster.track(child, `redis-server :${port}`);
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`redis-server exited:\n${output()}`);
    return (await canConnect(port)) && (await pingRedis(port));
  }, `redis-server on ${port}`);
  return child;
}

async function pingRedis(port: number): Promise<boolean> {
  try {
    return (await withRedis(`redis://127.0.0.1:${port}`, (redis) => redis.ping())) === 'PONG';
  } catch {
    return false;
  }
}

/** The nginx binary: NGINX_BIN, /usr/sbin/nginx or nginx on the PATH. */
export function findNginx(): string | undefined {
  for (const candidate of [process.env['NGINX_BIN'], '/usr/sbin/nginx', 'nginx']) {
    if (candidate && hasProgram(candidate, ['-v'])) return candidate;
  }
  return undefined;
}

/**
 * deploy/nginx.conf (a conf.d file) for gateways on 127.0.0.1: each `server gateway-N:8080`
 * of its upstreams becomes `server 127.0.0.1:<ports[N-1]>` and `listen 8080` becomes
 * `listen 127.0.0.1:<listenPort>`. Throws when the file no longer has that shape.
 */
export function renderNginxSite(template: string, ports: readonly number[], listenPort: number) {
  let servers = 0;
  const site = template
    .replace(/^(\s*server\s+)gateway-(\d+):8080\b/gm, (_all, lead: string, n: string) => {
      const port = ports[Number(n) - 1];
      if (port === undefined) throw new Error(`deploy/nginx.conf: no port for gateway-${n}`);
      servers++;
      return `${lead}127.0.0.1:${port}`;
    })
    .replace(/^(\s*listen\s+)8080\s*;/m, `$1127.0.0.1:${listenPort};`);
  // Each upstream block (by connections, by client) lists every gateway.
  if (
    servers === 0 ||
    servers % ports.length !== 0 ||
    !site.includes(`listen 127.0.0.1:${listenPort};`)
  ) {
    throw new Error('deploy/nginx.conf: expected upstream servers gateway-N:8080 and listen 8080');
  }
  return site;
}

/** Start nginx in the foreground with `site` inside a minimal main configuration, all files under `dir`. */
export async function startNginx(
  cluster: Cluster,
  bin: string,
  dir: string,
  site: string,
  port: number,
): Promise<ChildProcess> {
  // Workers may run as an unprivileged user (when started as root): they must reach the temp dirs.
  chmodSync(dir, 0o755);
  mkdirSync(join(dir, 'logs'), { recursive: true });
  const built = spawnSync(bin, ['-V'], { encoding: 'utf8' }).stderr;
  const tempPaths = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']
    .filter((kind) => kind === 'client_body' || !built.includes(`--without-http_${kind}_module`))
    .map((kind) => `  ${kind}_temp_path ${join(dir, kind)};`)
    .join('\n');
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    `events {}\nhttp {\n  access_log ${join(dir, 'logs/access.log')};\n${tempPaths}\n${site}\n}\n`,
  );
  const errorLog = join(dir, 'logs/error.log');
  const child = spawn(
    bin,
    [
      '-p',
      dir,
      '-c',
      conf,
      '-e',
      errorLog,
      '-g',
      `daemon off; worker_processes 1; pid ${join(dir, 'nginx.pid')}; error_log ${errorLog};`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const output = cluster.track(child, 'nginx', 'SIGTERM');
  await waitFor(async () => {
    if (child.exitCode !== null) {
      const log = existsSync(errorLog) ? spawnSync('tail', ['-n', '20', errorLog]).stdout : '';
      throw new Error(`nginx exited (${child.exitCode}):\n${output()}\n${String(log)}`);
    }
    return canConnect(port);
  }, `nginx on ${port}`);
  return child;
}
