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
}

describe('docker-compose.yml', () => {
  const compose = parse(read('docker-compose.yml')) as { services: Record<string, Service> };
  const { services } = compose;

  it('runs two gateways, Redis and nginx', () => {
    expect(Object.keys(services).sort()).toEqual(['gateway-1', 'gateway-2', 'nginx', 'redis']);
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

  it('wires both gateways to Redis, built from the Dockerfile, listening on 0.0.0.0:8080', () => {
    for (const name of ['gateway-1', 'gateway-2']) {
      const gateway = services[name]!;
      expect(gateway.build).toBe('.');
      expect(gateway.environment).toMatchObject({
        BROKER: 'redis',
        REDIS_URL: 'redis://redis:6379',
        HOST: '0.0.0.0',
        PORT: '8080',
      });
      expect(gateway.depends_on).toEqual({ redis: { condition: 'service_healthy' } });
      // Longer than the drain deadline's default, so SIGTERM ends in a drain, not a kill.
      expect(parseInt(gateway.stop_grace_period!, 10)).toBeGreaterThan(10);
    }
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
    for (const name of ['gateway-1', 'gateway-2', 'redis'])
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
    expect(runStage).toMatch(/^CMD \["node", "dist\/demo\/main.js"\]$/m);
    expect(runStage).toContain('HOST=0.0.0.0');
  });
});
