/** deploy/nginx.conf passes the HTTP streaming fallback's event stream through unbuffered. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

describe('deploy/nginx.conf, the events location', () => {
  const conf = readFileSync(new URL('../../deploy/nginx.conf', import.meta.url), 'utf8');

  it('turns buffering off and keeps the stream open past the heartbeat', () => {
    const block = /location\s+\/rpc\/events\s*\{([^}]*)\}/.exec(conf);
    expect(block, 'a location block for /rpc/events').not.toBeNull();
    const body = block![1]!;
    expect(body).toMatch(/^\s*proxy_buffering off;/m);
    // A session lives on one node: its stream, POSTs and resumes go where its address hashes.
    expect(body).toMatch(/^\s*proxy_pass http:\/\/gateways_by_client;/m);
    const upstream = /upstream gateways_by_client \{([^}]*)\}/.exec(conf);
    expect(upstream, 'an upstream routed by client').not.toBeNull();
    expect(upstream![1]).toMatch(/^\s*hash \$remote_addr consistent;/m);
    expect(upstream![1]).toMatch(/server gateway-1:8080[^;]*;\s*server gateway-2:8080/);
    expect(body).toMatch(/^\s*proxy_http_version 1\.1;/m);
    const timeout = /proxy_read_timeout (\d+)s;/.exec(body);
    expect(Number(timeout?.[1])).toBeGreaterThan(15);
  });
});
