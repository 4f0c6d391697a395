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
    expect(body).toMatch(/^\s*proxy_pass http:\/\/gateways;/m);
    expect(body).toMatch(/^\s*proxy_http_version 1\.1;/m);
    const timeout = /proxy_read_timeout (\d+)s;/.exec(body);
    expect(Number(timeout?.[1])).toBeGreaterThan(15);
  });
});
