import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

// Docker cannot run here: these tests check the deployment files' syntax and wiring, and
// the cluster tests prove the same topology (gateways on one broker, nginx in front) without it.
const root = new URL('../../', import.meta.url);
const read = (path: string): string => readFileSync(new URL(path, root), 'utf8');

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  ports?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  volumes?: string[];
  stop_grace_period?: string;
  networks?: string[];
}

interface Compose {
  services: Record<string, Service>;
  networks?: Record<string, { ipam?: { config?: { subnet?: string }[] } } | null>;
}

/** A compose duration ("30s", "1m30s", "1500ms") in milliseconds. */
function durationMs(text: string): number {
  const units: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1, us: 1e-3 };
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|us|h|m|s)/g)];
  expect(parts.map((p) => p[0]).join(''), `duration ${text}`).toBe(text);
  return parts.reduce((sum, [, n, unit]) => sum + Number(n) * units[unit!]!, 0);
}

// What a SIGTERM may take, after the drain deadline (demo/main.ts: gateway.drain, which then
// closes as gateway.close does): up to 5 s for the sessions' closing handshakes (close's
// timeoutMs default), then closing the broker and flushing the log; 5 s more covers those.
const CLOSE_WAIT_MS = 5_000;
const HEADROOM_MS = 5_000;

describe('docker-compose.yml', () => {
  const compose = parse(read('docker-compose.yml')) as Compose;
  const { services } = compose;

  it('runs two gateways, the orders service, Redis and nginx', () => {
    expect(Object.keys(services).sort()).toEqual([
      'gateway-1',
      'gateway-2',
      'nginx',
      'orders',
      'redis',
    ]);
  });

  it('gives every service a health check', () => {
    for (const [name, service] of Object.entries(services)) {
      expect(service.healthcheck?.test[0], name).toBe('CMD');
    }
    expect(services['redis']!.healthcheck!.test).toContain('ping');
    for (const gateway of ['gateway-1', 'gateway-2']) {
      expect(services[gateway]!.healthcheck!.test.join(' ')).toContain('/readyz');
    }
  });

  it('wires both gateways to Redis and the orders service, built from the Dockerfile, listening on 0.0.0.0:8080', () => {
    for (const name of ['gateway-1', 'gateway-2']) {
      const gateway = services[name]!;
      expect(gateway.build).toBe('.');
      expect(gateway.environment).toMatchObject({
        REDIS_URL: 'redis://redis:6379',
        HOST: '0.0.0.0',
        PORT: '8080',
        API_HOST: '0.0.0.0',
        API_PORT: '8081',
        ORDERS_URL: 'http://orders:9001/rpc',
      });
      expect(gateway.depends_on).toEqual({
        redis: { condition: 'service_healthy' },
        orders: { condition: 'service_healthy' },
      });
    }
  });

  it('gives every variable the baked-in configuration file needs to the gateways', () => {
    const config = read('demo/gateway-mode/gateway.yaml');
    const needed = [...config.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1]);
    const referenced = [...config.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1]);
    for (const name of ['gateway-1', 'gateway-2']) {
      const environment = services[name]!.environment ?? {};
      // Those without a default must be set; the others are set here so the file's defaults
      // (loopback addresses) do not apply in containers.
      for (const variable of new Set([...needed, ...referenced])) {
        expect(environment[variable!], `${name}: ${variable}`).toBeDefined();
      }
    }
  });

  it("runs the orders service from the example with Python only, its API key the gateways'", () => {
    const orders = services['orders']!;
    expect(orders.image).toMatch(/^python:3/);
    expect(orders.command).toEqual(['python3', '/app/upstream.py']);
    expect(orders.volumes).toContain('./demo/gateway-mode/upstream.py:/app/upstream.py:ro');
    expect(orders.environment).toMatchObject({ HOST: '0.0.0.0', PORT: '9001' });
    expect(orders.environment?.['WSRPC_API_URL']).toMatch(/^http:\/\/gateway-[12]:8081\/$/);
    expect(orders.environment?.['WSRPC_API_KEY']).toBe(
      services['gateway-1']!.environment?.['BACKEND_API_KEY'],
    );
  });

  it('gives a drain time to finish before Docker kills a gateway', () => {
    for (const name of ['gateway-1', 'gateway-2']) {
      const gateway = services[name]!;
      // The deadline is set, not left to the default, so the grace period can be checked against it.
      const deadline = Number(gateway.environment?.['DRAIN_DEADLINE_MS']);
      expect(deadline, name).toBeGreaterThan(0);
      expect(durationMs(gateway.stop_grace_period!), name).toBeGreaterThanOrEqual(
        deadline + CLOSE_WAIT_MS + HEADROOM_MS,
      );
    }
  });

  it('puts every service on one network with a fixed subnet, which the gateways trust for X-Forwarded-For', () => {
    const networks = Object.entries(compose.networks ?? {});
    expect(networks).toHaveLength(1);
    const [network, settings] = networks[0]!;
    const subnets = (settings?.ipam?.config ?? []).map((c) => c.subnet);
    expect(subnets).toHaveLength(1);
    const subnet = subnets[0]!;
    expect(subnet).toMatch(/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/);
    for (const [name, service] of Object.entries(services))
      expect(service.networks, name).toEqual([network]);
    for (const name of ['gateway-1', 'gateway-2'])
      expect(services[name]!.environment?.['TRUSTED_PROXIES'], name).toBe(subnet);
  });

  it('publishes only nginx, with the load balancer config mounted', () => {
    expect(services['nginx']!.ports).toEqual(['8080:8080']);
    expect(services['nginx']!.volumes).toContain(
      './deploy/nginx.conf:/etc/nginx/conf.d/default.conf:ro',
    );
    expect(services['nginx']!.depends_on).toEqual({
      'gateway-1': { condition: 'service_healthy' },
      'gateway-2': { condition: 'service_healthy' },
    });
    for (const name of ['gateway-1', 'gateway-2', 'orders', 'redis'])
      expect(services[name]!.ports).toBeUndefined();
  });
});

describe('deploy/nginx.conf', () => {
  const conf = read('deploy/nginx.conf');

  it('forwards WebSocket upgrades to both gateways', () => {
    expect(conf).toMatch(
      /upstream gateways \{[^}]*server gateway-1:8080[^}]*server gateway-2:8080[^}]*\}/s,
    );
    expect(conf).toContain('proxy_http_version 1.1;');
    expect(conf).toContain('proxy_set_header Upgrade $http_upgrade;');
    expect(conf).toContain('proxy_set_header Connection $connection_upgrade;');
    expect(conf).toMatch(
      /map \$http_upgrade \$connection_upgrade \{\s*default upgrade;\s*''\s+close;\s*\}/,
    );
  });

  it('does not serve /metrics through the load balancer', () => {
    const metrics = /location\s+(=\s*)?\/metrics\s*\{([^}]*)\}/.exec(conf);
    expect(metrics, 'a location block for /metrics').not.toBeNull();
    const body = metrics![2]!;
    expect(body).toMatch(/^\s*deny all;/m);
    expect(body).not.toContain('proxy_pass');
    // No allow rule opens it to the world again.
    expect(body).not.toMatch(/allow\s+(all|0\.0\.0\.0\/0)/);
  });

  it('does not cut idle WebSockets and skips a draining gateway', () => {
    expect(conf).toMatch(/proxy_read_timeout \d{3,}s;/);
    expect(conf).toMatch(/proxy_next_upstream [^;]*http_503/);
  });
});

describe('Dockerfile', () => {
  const dockerfile = read('Dockerfile');
  const stages = dockerfile.split('\n').filter((line) => line.startsWith('FROM '));

  it('builds in one stage and runs from another', () => {
    expect(stages).toHaveLength(2);
    expect(stages[0]).toMatch(/ AS build$/);
    expect(dockerfile).toContain('COPY --from=build');
    expect(dockerfile).toContain('npm run build');
    expect(dockerfile).toContain('npm prune --omit=dev');
  });

  it('runs as a non-root user under an init process, with a health check', () => {
    const runStage = dockerfile.slice(dockerfile.lastIndexOf('FROM '));
    expect(runStage).toMatch(/^USER node$/m);
    expect(runStage).toMatch(/^ENTRYPOINT \["\/usr\/bin\/tini", "--"\]$/m);
    expect(runStage).toContain('HEALTHCHECK');
    expect(runStage).toContain('HOST=0.0.0.0');
  });

  it('runs gateway mode with the configuration file baked into the image', () => {
    const runStage = dockerfile.slice(dockerfile.lastIndexOf('FROM '));
    expect(runStage).toMatch(
      /^CMD \["node", "dist\/src\/cli\/main.js", "serve", "--config", "\/app\/config\/gateway.yaml"\]$/m,
    );
    expect(runStage).toContain(
      'COPY --chown=node:node demo/gateway-mode/gateway.yaml ./config/gateway.yaml',
    );
    expect(runStage).toContain('COPY --chown=node:node demo/gateway-mode/web ./config/web');
    expect(runStage).toContain('HOST=0.0.0.0');
  });
});
