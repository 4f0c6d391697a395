import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { findNginx, renderNginxSite, startNginx } from '../support/server-processes.js';
import { httpGet } from '../support/network.js';
import { inCi, root } from '../support/environment.js';
import { killChild } from '../support/processes.js';
import type { Cluster } from '../support/cluster.js';
import { freePort } from '../support/network.js';

// deploy/nginx.conf as nginx runs it (rendered for 127.0.0.1 as the cluster test does), in
// front of two stand-in upstreams that answer every path: /metrics must stop at nginx.
const nginxBin = findNginx();
const skip = !nginxBin && !inCi;

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function upstream(seen: string[]): Promise<number> {
  const server: Server = createServer((req, res) => {
    seen.push(req.url ?? '');
    res.end('upstream');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as AddressInfo).port;
}

describe.skipIf(skip)(
  skip ? 'deploy/nginx.conf run by nginx (skipped: no nginx)' : 'deploy/nginx.conf run by nginx',
  () => {
    it('refuses /metrics (403) and forwards every other path to the gateways', async () => {
      const seen: string[] = [];
      const ports = [await upstream(seen), await upstream(seen)];
      const listen = await freePort();
      const site = renderNginxSite(
        readFileSync(join(root, 'deploy/nginx.conf'), 'utf8'),
        ports,
        listen,
      );
      const dir = mkdtempSync(join(tmpdir(), 'wsrpc-nginx-'));
      const children: ChildProcess[] = [];
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      cleanups.push(() => Promise.all(children.map((child) => killChild(child, 'SIGTERM'))));
      // startNginx only asks the cluster to keep the child's output and stop it afterwards.
      const tracker = {
        track(child: ChildProcess) {
          children.push(child);
          let output = '';
          child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
          return () => output;
        },
      } as unknown as Cluster;
      await startNginx(tracker, nginxBin ?? 'nginx', dir, site, listen);
      const front = `http://127.0.0.1:${listen}`;

      for (const path of [
        '/metrics',
        '/metrics?name[]=rpc_connections',
        '/metrics/',
        '//metrics',
      ]) {
        expect((await httpGet(`${front}${path}`)).status, path).toBe(403);
      }
      expect(seen.filter((url) => url.includes('metrics'))).toEqual([]);

      const readyz = await httpGet(`${front}/readyz`);
      expect(readyz).toEqual({ status: 200, body: 'upstream' });
      expect(seen).toContain('/readyz');
    }, 30_000);
  },
);
