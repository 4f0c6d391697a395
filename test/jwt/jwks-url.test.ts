// jwtAuth with `jwksUrl`, against a key set served by a local HTTP server whose keys rotate
// during the test: a new kid is taken after one refetch, refetches are rate-limited (the
// server counts its requests), a removed key is refused once the cache has expired; a server
// that never answers, or answers garbage, is a 503 and never a crash.
import { createServer } from 'node:http';
import type { Server, ServerResponse } from 'node:http';
import type { JWK } from 'jose';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { jwtAuth } from '../../src/jwt.js';
import { MAX_JWKS_BYTES } from '../../src/server/jwt/key-source.js';
import { freePort, listenOnLoopback } from '../support/network.js';
import { sleep } from '../support/promises.js';
import { refusal, signWith, signingKey, withToken } from './jwt-fixtures.js';
import type { SigningKey } from './jwt-fixtures.js';

/** What the key set server answers with, changed by the tests as they go. */
type Answer = { keys: JWK[] } | { status: number; body: string } | 'never';

interface KeySetServer {
  url: string;
  /** GET requests received. */
  requests: () => number;
  answer: (next: Answer) => void;
  close: () => Promise<void>;
}

const servers: KeySetServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function keySetServer(first: Answer): Promise<KeySetServer> {
  let answer = first;
  let requests = 0;
  const held: ServerResponse[] = [];
  const server: Server = createServer((_req, res) => {
    requests++;
    if (answer === 'never') {
      held.push(res); // never answered: the client's timeout has to end it
      return;
    }
    if ('keys' in answer) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: answer.keys }));
      return;
    }
    res.writeHead(answer.status, { 'content-type': 'application/json' });
    res.end(answer.body);
  });
  const { port, close } = await listenOnLoopback(server);
  const handle: KeySetServer = {
    url: `http://127.0.0.1:${port}/.well-known/jwks.json`,
    requests: () => requests,
    answer: (next) => {
      answer = next;
    },
    close: () => {
      for (const res of held) res.destroy();
      return close();
    },
  };
  servers.push(handle);
  return handle;
}

describe('jwtAuth with jwksUrl', () => {
  let first: SigningKey;
  let second: SigningKey;
  beforeAll(async () => {
    first = await signingKey('ES256', 'key-2025-01');
    second = await signingKey('RS256', 'key-2025-02');
  });

  it('rotates keys: a new kid after one refetch, refetches rate-limited, a removed key refused once the cache expired', async () => {
    const server = await keySetServer({ keys: [first.publicJwk] });
    const auth = jwtAuth({ jwksUrl: server.url, jwksCooldownMs: 1_000, jwksCacheMaxAgeMs: 3_000 });
    const verify = async (token: string) =>
      auth.authenticate(withToken(token)).then(
        () => 'accepted',
        (err: { status: number; message: string }) => `${err.status} ${err.message}`,
      );
    const byFirst = await signWith(first);
    const bySecond = await signWith(second);

    expect(await verify(byFirst)).toBe('accepted');
    expect(server.requests()).toBe(1);
    expect(await verify(byFirst)).toBe('accepted'); // cached
    expect(server.requests()).toBe(1);

    // The issuer rotates: the set gains the second key, tokens signed by it start arriving.
    server.answer({ keys: [first.publicJwk, second.publicJwk] });
    await sleep(1_100); // past the cooldown of the first fetch
    const burst = await Promise.all(Array.from({ length: 20 }, () => verify(bySecond)));
    expect(burst).toEqual(Array.from({ length: 20 }, () => 'accepted'));
    expect(server.requests()).toBe(2); // one refetch for the whole burst

    // Unknown kids in a flood: at most one refetch per cooldown.
    const stranger = await signWith(await signingKey('ES256', 'never-published'));
    const flood = await Promise.all(Array.from({ length: 20 }, () => verify(stranger)));
    expect(new Set(flood)).toEqual(new Set(['401 unknown key id']));
    expect(server.requests()).toBe(2); // within the cooldown of the last fetch: none
    await sleep(1_100);
    expect(await verify(stranger)).toBe('401 unknown key id');
    expect(await verify(stranger)).toBe('401 unknown key id');
    expect(server.requests()).toBe(3); // one more, then cooling down again

    // The first key leaves the set: still taken while the fetched set is fresh...
    server.answer({ keys: [second.publicJwk] });
    expect(await verify(byFirst)).toBe('accepted');
    expect(server.requests()).toBe(3);
    // ...and refused once it has expired and the set was fetched again.
    await sleep(3_100);
    expect(await verify(byFirst)).toBe('401 unknown key id');
    expect(await verify(bySecond)).toBe('accepted');
    expect(server.requests()).toBe(4);
  });

  it('a key set server that never answers: 503 after jwksTimeoutMs', async () => {
    const server = await keySetServer('never');
    const auth = jwtAuth({ jwksUrl: server.url, jwksTimeoutMs: 300 });
    const token = await signWith(first);
    // The server never answers, so only a timer can end the fetch: which one is told by the
    // timeout signals made for it, and the order of its firing and the refusal.
    const order: string[] = [];
    const timers: number[] = [];
    const timeout = AbortSignal.timeout.bind(AbortSignal);
    const spy = vi.spyOn(AbortSignal, 'timeout').mockImplementation((ms) => {
      timers.push(ms);
      const signal = timeout(ms);
      signal.addEventListener('abort', () => order.push(`${ms} ms timer`));
      return signal;
    });
    try {
      const answer = await refusal(auth.authenticate(withToken(token)));
      order.push('refusal');
      expect(answer).toEqual({ status: 503, message: 'key set unavailable: timed out' });
    } finally {
      spy.mockRestore();
    }
    expect(timers).toEqual([300]);
    expect(order).toEqual(['300 ms timer', 'refusal']);
  });

  it('garbage from the key set server, an error status, no server at all: 503 saying which', async () => {
    const server = await keySetServer({ status: 200, body: '<html>not json' });
    const auth = jwtAuth({ jwksUrl: server.url, jwksCooldownMs: 0, jwksCacheMaxAgeMs: 0 });
    const token = await signWith(first);
    const attempt = () => refusal(auth.authenticate(withToken(token)));
    expect(await attempt()).toEqual({ status: 503, message: 'key set unavailable: not JSON' });
    server.answer({ status: 200, body: '{"keys": "no"}' });
    expect(await attempt()).toEqual({
      status: 503,
      message: 'key set unavailable: not a JSON Web Key Set',
    });
    server.answer({ status: 200, body: '[1, 2, 3]' });
    expect(await attempt()).toEqual({
      status: 503,
      message: 'key set unavailable: not a JSON Web Key Set',
    });
    server.answer({ status: 500, body: '{}' });
    expect(await attempt()).toEqual({ status: 503, message: 'key set unavailable: HTTP 500' });
    server.answer({ keys: [first.publicJwk] });
    expect((await auth.authenticate(withToken(token))).user).toBe('alice');

    const gone = jwtAuth({ jwksUrl: `http://127.0.0.1:${await freePort()}/jwks.json` });
    expect(await refusal(gone.authenticate(withToken(token)))).toEqual({
      status: 503,
      message: 'key set unavailable: unreachable (ECONNREFUSED)',
    });
  });

  it('a key set larger than MAX_JWKS_BYTES: 503, read no further than the bound', async () => {
    const token = await signWith(first);
    // Chunked (no Content-Length): 64 MiB of whitespace, then a set that would be fine.
    const chunk = Buffer.alloc(1 << 20, 0x20);
    let written = 0;
    const server: Server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const pump = (): void => {
        while (written < 64) {
          written++;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end(JSON.stringify({ keys: [first.publicJwk] }));
      };
      res.on('error', () => undefined);
      pump();
    });
    const { port, close } = await listenOnLoopback(server);
    try {
      const auth = jwtAuth({ jwksUrl: `http://127.0.0.1:${port}/jwks.json` });
      expect(await refusal(auth.authenticate(withToken(token)))).toEqual({
        status: 503,
        message: `key set unavailable: larger than ${MAX_JWKS_BYTES} bytes`,
      });
      // Socket buffers let a few MiB past the bound through, not the whole body.
      expect(written).toBeLessThan(16);
    } finally {
      await close();
    }
    // One that says its size up front is refused without reading the body.
    const declared = await keySetServer({ status: 200, body: ' '.repeat(MAX_JWKS_BYTES + 1) });
    const auth = jwtAuth({ jwksUrl: declared.url });
    expect(await refusal(auth.authenticate(withToken(token)))).toEqual({
      status: 503,
      message: `key set unavailable: larger than ${MAX_JWKS_BYTES} bytes`,
    });
  });
});
