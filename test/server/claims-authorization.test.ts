import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import { claimsAllow, matchesAny } from '../../src/server/claims-authorization.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { token, tokenIdentity } from './identity-tokens.js';
import type { TestContext } from './identity-tokens.js';
import { openRawRpc } from './raw-rpc.js';
import type { RawRpc } from './raw-rpc.js';

let running: RunningGateway<TestContext> | undefined;
const sockets: RawRpc[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.close();
  await running?.gateway.close();
  running = undefined;
});

describe('patterns', () => {
  it('match exact names and prefixes ending in *', () => {
    expect(matchesAny(['news.*', 'sports.x'], 'news.a.b')).toBe(true);
    expect(matchesAny(['news.*'], 'news')).toBe(false);
    expect(matchesAny(['sports.x'], 'sports.xy')).toBe(false);
    expect(matchesAny(['*'], 'anything')).toBe(true);
    expect(matchesAny([], 'news.a')).toBe(false);
  });

  it('undefined claims restrict nothing; a failing or malformed hook allows nothing', () => {
    expect(claimsAllow(() => undefined, {}, 'x', silentLogger, 'topicsOf')).toBe(true);
    expect(claimsAllow(undefined, {}, 'x', silentLogger, 'topicsOf')).toBe(true);
    const broken = (): never => {
      throw new Error('no claims');
    };
    expect(claimsAllow(broken, {}, 'x', silentLogger, 'topicsOf')).toBe(false);
    const notArray = () => 'x' as unknown as string[];
    expect(claimsAllow(notArray, {}, 'x', silentLogger, 'topicsOf')).toBe(false);
  });
});

async function start() {
  const authorized: string[] = [];
  running = await startGateway<TestContext>(tokenIdentity());
  const { gateway } = running;
  gateway.topic('news.*', {
    authorize: ({ topic }) => {
      authorized.push(topic);
      return topic !== 'news.secret';
    },
  });
  gateway.method('echo', (params) => params);
  gateway.method('admin.reset', () => 'reset');
  gateway.method('admin.other', () => 'other');
  const noted: unknown[] = [];
  gateway.method('note', (params) => void noted.push(params));
  return { ...running, authorized, noted };
}

async function open(url: string, claims: { topics?: string[]; methods?: string[] }) {
  const socket = await openRawRpc(url, {
    authorization: `Bearer ${token({ user: 'ann', ...claims })}`,
  });
  sockets.push(socket);
  return socket;
}

describe('authorization from claims', () => {
  it('topicsOf: exact and prefix patterns, checked before the topic authorize; both must allow', async () => {
    const { url, authorized } = await start();
    const socket = await open(url, { topics: ['news.a', 'news.secret', 'news.sub.*'] });
    expect((await socket.request('subscribe', ['news.a'])).error).toBeUndefined();
    expect((await socket.request('subscribe', ['news.sub.deep'])).error).toBeUndefined();
    const outside = await socket.request('subscribe', ['news.b']);
    expect(outside.error).toMatchObject({
      code: ErrorCode.Unauthorized,
      data: { topic: 'news.b' },
    });
    // The claims allow it, the topic's own hook does not.
    const hookSaysNo = await socket.request('subscribe', ['news.secret']);
    expect(hookSaysNo.error).toMatchObject({ code: ErrorCode.Unauthorized });
    // The claims are asked first: the hook never saw news.b.
    expect(authorized).toEqual(['news.a', 'news.sub.deep', 'news.secret']);
  });

  it('no topic claims: only the topic authorize decides', async () => {
    const { url } = await start();
    const socket = await open(url, {});
    expect((await socket.request('subscribe', ['news.b'])).error).toBeUndefined();
    expect((await socket.request('subscribe', ['news.secret'])).error?.code).toBe(
      ErrorCode.Unauthorized,
    );
  });

  it('methodsOf: calls and notifications outside the patterns refused (-32004), subscribe left to topicsOf', async () => {
    const { url, noted } = await start();
    const socket = await open(url, { methods: ['echo', 'admin.reset', 'note.*'] });
    expect((await socket.request('echo', ['hi'])).result).toEqual(['hi']);
    expect((await socket.request('admin.reset')).result).toBe('reset');
    expect((await socket.request('admin.other')).error?.code).toBe(ErrorCode.Unauthorized);
    expect((await socket.request('subscribe', ['news.a'])).error).toBeUndefined();
    expect((await socket.request('rpc.ping')).result).toBe('pong');
    socket.notify('note', [1]);
    await socket.request('rpc.ping');
    expect(noted).toEqual([]);
  });

  it('methodsOf and the application authorize: both must allow', async () => {
    running = await startGateway<TestContext>({
      ...tokenIdentity(),
      authorize: ({ method }) => method !== 'echo',
    });
    running.gateway.method('echo', (params) => params);
    running.gateway.method('other', () => 'other');
    running.gateway.method('third', () => 'third');
    const socket = await open(running.url, { methods: ['echo', 'other'] });
    expect((await socket.request('echo', [1])).error?.code).toBe(ErrorCode.Unauthorized);
    expect((await socket.request('other')).result).toBe('other');
    expect((await socket.request('third')).error?.code).toBe(ErrorCode.Unauthorized);
  });
});
