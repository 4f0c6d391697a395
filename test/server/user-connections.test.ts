// limits.maxConnectionsPerUser: the sessions of one user on a node, over real gateways and
// sockets: the handshake refusal (429, a TCP refusal line, an event stream's 429), the in-band
// refusal (-32000 then close 4429), HTTP POST exchanges (counted while they run, 429 past the
// bound), and a model of open/authenticate/refresh/close/POST sequences.
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/protocol/error-codes.js';
import type { Admission } from '../../src/server/admission.js';
import type { Gateway } from '../../src/server/gateway.js';
import { resolveLimits } from '../../src/server/options.js';
import type { GatewayLimits } from '../../src/server/options.js';
import type { Session } from '../../src/server/session.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { openStream } from '../sse/sse-raw.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { sampleValue, scrape } from '../support/metrics.js';
import { deferred } from '../support/promises.js';
import type { Deferred } from '../support/promises.js';
import { waitFor } from '../support/waiting.js';
import { postRpc } from './http-post.js';
import type { PostAnswer } from './http-post.js';
import { openRawRpc } from './raw-rpc.js';
import type { RawRpc } from './raw-rpc.js';

interface Ctx {
  user: string | undefined;
}

const gateways: RunningGateway<Ctx>[] = [];
const sockets: RawRpc[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.close();
  for (const running of gateways.splice(0)) await running.gateway.close();
});

/**
 * A gateway whose hook takes "good-<user>" tokens ("anon": a session without a user), in a
 * Bearer header or in-band, at most `maxConnectionsPerUser` sessions per user.
 */
async function start(
  maxConnectionsPerUser: number,
  limits: GatewayLimits = {},
): Promise<RunningGateway<Ctx>> {
  const running = await startGateway<Ctx>({
    authenticate: ({ token }) => {
      if (token === 'anon') return { user: undefined };
      if (!token?.startsWith('good-')) throw new UpgradeRejection(401, 'invalid token');
      return { user: token.slice(5) };
    },
    userOf: (context) => context.user,
    identity: { inBand: true },
    limits: { maxConnectionsPerUser, connectionsPerSecondPerIp: 0, ...limits },
  });
  gateways.push(running);
  return running;
}

function gatewayAdmission(gateway: Gateway<Ctx>): Admission {
  return (gateway as unknown as { admission: Admission }).admission;
}

function counted(gateway: Gateway<Ctx>): Admission['users'] {
  return gatewayAdmission(gateway).users;
}

/** A socket authenticated at the upgrade with `token` (a Bearer header), or in-band without. */
async function open(url: string, token?: string): Promise<RawRpc> {
  const socket = await openRawRpc(url, token ? { authorization: `Bearer ${token}` } : undefined);
  sockets.push(socket);
  return socket;
}

/** The status of an upgrade the gateway refuses. */
async function refusedStatus(url: string, token: string): Promise<number> {
  const error = await open(url, token).then(
    () => undefined,
    (err: unknown) => err as { status: number },
  );
  expect(error, 'the upgrade was refused').toBeDefined();
  return error!.status;
}

/** The session the gateway opened for the next connection `connect` makes. */
async function sessionOf<T>(
  gateway: Gateway<Ctx>,
  connect: () => Promise<T>,
): Promise<[T, Session<Ctx>]> {
  const before = new Set(gateway.sessions.keys());
  const made = await connect();
  const fresh = [...gateway.sessions.values()].filter((s) => !before.has(s.id));
  expect(fresh).toHaveLength(1);
  return [made, fresh[0]!];
}

/**
 * A `hold` method on `gateway` whose calls are answered when the test says: `entered(n)`
 * resolves once n calls have started (each one's exchange or connection counted by then).
 */
function holdMethod(gateway: Gateway<Ctx>) {
  let started = 0;
  let release = deferred();
  const waiters: { count: number; resolve: () => void }[] = [];
  gateway.method('hold', async () => {
    started++;
    for (const waiter of waiters.filter((w) => w.count <= started)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
    await release.promise;
    return 'held';
  });
  return {
    entered(count: number): Promise<void> {
      if (started >= count) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ count, resolve }));
    },
    release(): void {
      release.resolve();
      release = deferred();
    },
  };
}

/** A POST of `method` to the gateway's path with the Bearer `token`. */
function post(httpUrl: string, token: string, method = 'rpc.ping'): Promise<PostAnswer> {
  return postRpc(`${httpUrl}/rpc`, { id: 1, method }, { token });
}

const USER_LIMIT_BODY = 'Too many connections for this user (maxConnectionsPerUser)\n';

/** Close the client's socket and wait until the gateway's session has closed (and left the count). */
async function closeBoth(socket: RawRpc, session: Session<Ctx>): Promise<void> {
  socket.close();
  await session.closed;
}

describe('limits.maxConnectionsPerUser', () => {
  it('is 1 000 by default, an integer at least 1', () => {
    expect(resolveLimits().maxConnectionsPerUser).toBe(1_000);
    expect(() => resolveLimits({ maxConnectionsPerUser: 0 })).toThrow(RangeError);
    expect(() => resolveLimits({ maxConnectionsPerUser: 1.5 })).toThrow(RangeError);
    expect(() => resolveLimits({ maxConnectionsPerUser: Infinity })).toThrow(RangeError);
  });

  it('refuses the upgrade of a user at the bound with 429; others get in; a close frees a place', async () => {
    const { gateway, url, httpUrl } = await start(2);
    const [first, firstSession] = await sessionOf(gateway, () => open(url, 'good-ann'));
    await open(url, 'good-ann');
    expect(counted(gateway).sessionsOf('ann')).toBe(2);
    const sessionsBefore = gateway.sessions.size;
    expect(await refusedStatus(url, 'good-ann')).toBe(429);
    expect(gateway.sessions.size).toBe(sessionsBefore);
    const metrics = await scrape(httpUrl);
    expect(sampleValue(metrics, 'rpc_rejected_upgrades_total', { reason: 'user-limit' })).toBe(1);
    // Another user, and sessions without a user, are not held back by ann's.
    const bob = await open(url, 'good-bob');
    expect((await bob.request('rpc.ping')).result).toBe('pong');
    await open(url, 'anon');
    await open(url, 'anon');
    expect(counted(gateway).users).toBe(2);
    await closeBoth(first, firstSession);
    expect(counted(gateway).sessionsOf('ann')).toBe(1);
    const again = await open(url, 'good-ann');
    expect((await again.request('rpc.ping')).result).toBe('pong');
  });

  it('answers an in-band rpc.authenticate past the bound -32000 and closes 4429', async () => {
    const { gateway, url } = await start(1);
    const announced: string[] = [];
    gateway.connected$.subscribe((session) => announced.push(`+${session.user}`));
    gateway.disconnected$.subscribe((session) => announced.push(`-${session.user}`));
    await open(url, 'good-ann'); // at the upgrade: counted with the in-band ones
    // Not counted while unauthenticated.
    const waiting = await open(url);
    expect(counted(gateway).sessionsOf('ann')).toBe(1);
    const reply = await waiting.request('rpc.authenticate', { token: 'good-ann' });
    expect(reply.error).toEqual({
      code: ErrorCode.ServerBusy,
      message: 'Too many connections for this user (maxConnectionsPerUser)',
      data: { maxConnectionsPerUser: 1 },
    });
    expect(await waiting.closed).toEqual({
      code: 4429,
      reason: 'too many connections for this user',
    });
    expect(counted(gateway).sessionsOf('ann')).toBe(1);
    // The refused one was never announced, nor is its close.
    expect(announced).toEqual(['+ann']);
    // Another user authenticates in-band.
    const bob = await open(url);
    expect((await bob.request('rpc.authenticate', { token: 'good-bob' })).result).toMatchObject({
      user: 'bob',
    });
    expect(counted(gateway).sessionsOf('bob')).toBe(1);
  });

  it('lets exactly the bound in of in-band authentications decided together', async () => {
    const { gateway, url } = await start(2);
    const pending = await Promise.all([open(url), open(url), open(url), open(url), open(url)]);
    const replies = await Promise.all(
      pending.map((socket) => socket.request('rpc.authenticate', { token: 'good-ann' })),
    );
    expect(replies.filter((reply) => reply.result !== undefined)).toHaveLength(2);
    expect(replies.filter((reply) => reply.error?.code === ErrorCode.ServerBusy)).toHaveLength(3);
    expect(counted(gateway).sessionsOf('ann')).toBe(2);
    const closes = await Promise.all(
      pending.filter((_, i) => replies[i]!.error).map((socket) => socket.closed),
    );
    expect(closes.map((close) => close.code)).toEqual([4429, 4429, 4429]);
  });

  it('keeps a refreshed session counted under its user; a refresh for another user is refused', async () => {
    const { gateway, url } = await start(1);
    const ann = await open(url, 'good-ann');
    expect((await ann.request('rpc.authenticate', { token: 'good-ann' })).result).toMatchObject({
      user: 'ann',
    });
    const changed = await ann.request('rpc.authenticate', { token: 'good-bob' });
    expect(changed.error).toMatchObject({
      code: ErrorCode.Unauthenticated,
      data: { reason: 'user-changed' },
    });
    expect(counted(gateway).sessionsOf('ann')).toBe(1);
    expect(counted(gateway).sessionsOf('bob')).toBe(0);
    expect(await refusedStatus(url, 'good-ann')).toBe(429);
    await open(url, 'good-bob');
  });

  it('counts an HTTP POST exchange as a session of its user until it ends: 429 user-limit past the bound, another user goes through', async () => {
    const { gateway, url, httpUrl } = await start(2);
    const held = holdMethod(gateway);
    const users = counted(gateway);
    const slow = [post(httpUrl, 'good-ann', 'hold'), post(httpUrl, 'good-ann', 'hold')];
    await held.entered(2);
    expect(users.sessionsOf('ann')).toBe(2);
    const refused = await post(httpUrl, 'good-ann');
    expect(refused).toMatchObject({ status: 429, retryAfter: '5', body: USER_LIMIT_BODY });
    // Exchanges and connections are counted together.
    expect(await refusedStatus(url, 'good-ann')).toBe(429);
    const bob = await post(httpUrl, 'good-bob');
    expect(bob.reply?.result).toBe('pong');
    expect((await post(httpUrl, 'anon')).reply?.result).toBe('pong');
    const metrics = await scrape(httpUrl);
    expect(sampleValue(metrics, 'rpc_rejected_upgrades_total', { reason: 'user-limit' })).toBe(2);
    held.release();
    for (const answer of await Promise.all(slow)) expect(answer.reply?.result).toBe('held');
    // Each exchange leaves the count once its work is done (after its response is sent).
    await waitFor(() => users.users === 0, 'the exchanges to leave the count');
    expect((await post(httpUrl, 'good-ann')).reply?.result).toBe('pong');
    await waitFor(() => users.users === 0, 'the exchange to leave the count');
    expect(gatewayAdmission(gateway).connections).toBe(0);
  });

  it('gives an exchange its session user; a userOf that throws refuses it 500, its slot freed', async () => {
    const running = await startGateway<Ctx>({
      authenticate: ({ token }) => ({ user: token }),
      userOf: (context) => {
        if (context.user === 'boom') throw new Error('userOf failed');
        return context.user;
      },
    });
    gateways.push(running);
    const { gateway, httpUrl } = running;
    gateway.method('whoami', (_params, ctx) => ctx.session.user ?? null);
    expect((await post(httpUrl, 'ann', 'whoami')).reply?.result).toBe('ann');
    const failed = await post(httpUrl, 'boom', 'whoami');
    expect(failed).toMatchObject({ status: 500, body: 'Internal server error\n' });
    expect(gatewayAdmission(gateway).connections).toBe(0);
    expect(counted(gateway).users).toBe(0);
  });

  it('refuses a TCP connection past the bound with a refusal line, an event stream with 429', async () => {
    const running = await startGateway<Ctx>({
      // TCP carries no token: the hook names the user itself.
      authenticate: ({ transport, headers }) => ({
        user: transport === 'tcp' ? 'ann' : (headers['x-user'] as string | undefined),
      }),
      userOf: (context) => context.user,
      routes: { events: '/rpc/events' },
      limits: { maxConnectionsPerUser: 1, connectionsPerSecondPerIp: 0 },
    });
    gateways.push(running);
    const { gateway, httpUrl } = running;
    const { port } = await gateway.listenTcp(0, '127.0.0.1');
    const tcp: Socket[] = [];
    const lineOf = async (): Promise<unknown> => {
      const socket = connect(port, '127.0.0.1');
      tcp.push(socket);
      socket.write('{"jsonrpc":"2.0","id":1,"method":"rpc.ping"}\n');
      // Read with a listener: leaving a `for await` over the socket would destroy it.
      const text = await new Promise<string>((resolve, reject) => {
        let read = '';
        socket.on('data', (chunk: Buffer) => {
          read += chunk.toString('utf8');
          if (read.includes('\n')) resolve(read);
        });
        socket.once('error', reject);
      });
      return JSON.parse(text.slice(0, text.indexOf('\n')));
    };
    try {
      expect(await lineOf()).toEqual({ jsonrpc: '2.0', id: 1, result: 'pong' });
      expect(await lineOf()).toEqual({
        jsonrpc: '2.0',
        id: null,
        error: {
          code: ErrorCode.ServerBusy,
          message: 'Too many connections for this user (maxConnectionsPerUser)',
          data: { status: 429 },
        },
      });
      const events = `${httpUrl}/rpc/events`;
      const first = await openStream(events, { headers: { 'x-user': 'bea' } });
      expect(first.status).toBe(200);
      const second = await openStream(events, { headers: { 'x-user': 'bea' } });
      expect(second.status).toBe(429);
      first.destroy();
      second.destroy();
      const metrics = await scrape(httpUrl);
      expect(sampleValue(metrics, 'rpc_rejected_upgrades_total', { reason: 'user-limit' })).toBe(1);
    } finally {
      for (const socket of tcp) socket.destroy();
    }
  });
});

/** One step of a model run. `at` picks a connection among those the step applies to. */
type Step =
  | { kind: 'upgrade'; user: number } // -1: a session without a user
  | { kind: 'in-band' }
  | { kind: 'authenticate'; at: number; user: number }
  | { kind: 'refresh'; at: number; user: number }
  | { kind: 'close'; at: number }
  | { kind: 'post'; user: number } // an HTTP POST exchange held until an 'end-post'
  | { kind: 'end-post'; at: number };

const USERS = ['u0', 'u1'];
const tokenOf = (user: number): string => (user < 0 ? 'anon' : `good-${USERS[user]}`);

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('upgrade' as const), user: fc.integer({ min: -1, max: 1 }) }),
  fc.record({ kind: fc.constant('in-band' as const) }),
  fc.record({
    kind: fc.constant('authenticate' as const),
    at: fc.nat(),
    user: fc.integer({ min: -1, max: 1 }),
  }),
  fc.record({
    kind: fc.constant('refresh' as const),
    at: fc.nat(),
    user: fc.integer({ min: -1, max: 1 }),
  }),
  fc.record({ kind: fc.constant('close' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('post' as const), user: fc.integer({ min: -1, max: 1 }) }),
  fc.record({ kind: fc.constant('end-post' as const), at: fc.nat() }),
);

/**
 * A `hold` method whose calls (params `{ key }`) each wait for their own release: `started(key)`
 * resolves once that call runs (its exchange counted by then), `release(key)` answers it.
 */
function keyedHolds(gateway: Gateway<Ctx>) {
  const started = new Map<number, Deferred<void>>();
  const released = new Map<number, Deferred<void>>();
  const of = (map: typeof started, key: number) => {
    let entry = map.get(key);
    if (!entry) map.set(key, (entry = deferred()));
    return entry;
  };
  gateway.method('hold', async (params) => {
    const key = (params as { key: number }).key;
    of(started, key).resolve();
    await of(released, key).promise;
    return key;
  });
  return {
    started: (key: number): Promise<void> => of(started, key).promise,
    release: (key: number): void => of(released, key).resolve(),
  };
}

/** An HTTP POST exchange in progress: its answer, once released. */
interface Exchange {
  key: number;
  user: number;
  answer: Promise<PostAnswer>;
}

interface Conn {
  socket: RawRpc;
  session: Session<Ctx>;
  /** undefined: in-band, not authenticated; -1: authenticated without a user. */
  user: number | undefined;
}

describe('limits.maxConnectionsPerUser, a model', () => {
  it('decides every open, authenticate, refresh and POST as a count per user would; empty once all close', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 3 }),
        // Full-length runs: at fast-check's default size a run is ~5 steps, and a user rarely
        // held two sessions at once, or reached a bound above 1.
        fc.array(step, { minLength: 1, maxLength: 30, size: 'max' }),
        async (max, steps) => {
          const { gateway, url, httpUrl } = await start(max);
          const users = counted(gateway);
          const holds = keyedHolds(gateway);
          const exchanges: Exchange[] = [];
          let nextKey = 0;
          const model = new Map<number, number>();
          const countOf = (user: number): number => model.get(user) ?? 0;
          const add = (user: number, by: number): void => {
            if (user < 0) return;
            const next = countOf(user) + by;
            if (next > 0) model.set(user, next);
            else model.delete(user);
          };
          const conns: Conn[] = [];
          const pick = (at: number, test: (conn: Conn) => boolean): Conn | undefined => {
            const among = conns.filter(test);
            return among.length === 0 ? undefined : among[at % among.length];
          };
          const drop = (conn: Conn): void => void conns.splice(conns.indexOf(conn), 1);
          try {
            for (const s of steps) {
              if (s.kind === 'upgrade') {
                if (s.user >= 0 && countOf(s.user) >= max) {
                  expect(await refusedStatus(url, tokenOf(s.user))).toBe(429);
                } else {
                  const [socket, session] = await sessionOf(gateway, () =>
                    open(url, tokenOf(s.user)),
                  );
                  conns.push({ socket, session, user: s.user });
                  add(s.user, 1);
                }
              } else if (s.kind === 'in-band') {
                const [socket, session] = await sessionOf(gateway, () => open(url));
                conns.push({ socket, session, user: undefined });
              } else if (s.kind === 'authenticate') {
                const conn = pick(s.at, (c) => c.user === undefined);
                if (!conn) continue;
                const reply = await conn.socket.request('rpc.authenticate', {
                  token: tokenOf(s.user),
                });
                if (s.user >= 0 && countOf(s.user) >= max) {
                  expect(reply.error?.code).toBe(ErrorCode.ServerBusy);
                  expect((await conn.socket.closed).code).toBe(4429);
                  await conn.session.closed;
                  drop(conn);
                } else {
                  expect(reply.result).toBeDefined();
                  conn.user = s.user;
                  add(s.user, 1);
                }
              } else if (s.kind === 'refresh') {
                const conn = pick(s.at, (c) => c.user !== undefined);
                if (!conn) continue;
                const reply = await conn.socket.request('rpc.authenticate', {
                  token: tokenOf(s.user),
                });
                if (s.user === conn.user) expect(reply.result).toBeDefined();
                else expect(reply.error?.data).toMatchObject({ reason: 'user-changed' });
              } else if (s.kind === 'close') {
                const conn = pick(s.at, () => true);
                if (!conn) continue;
                await closeBoth(conn.socket, conn.session);
                if (conn.user !== undefined) add(conn.user, -1);
                drop(conn);
              } else if (s.kind === 'post') {
                const key = nextKey++;
                const answer = postRpc(
                  `${httpUrl}/rpc`,
                  { id: 1, method: 'hold', params: { key } },
                  { token: tokenOf(s.user) },
                );
                if (s.user >= 0 && countOf(s.user) >= max) {
                  expect(await answer).toMatchObject({ status: 429, body: USER_LIMIT_BODY });
                } else {
                  await holds.started(key);
                  exchanges.push({ key, user: s.user, answer });
                  add(s.user, 1);
                }
              } else {
                const exchange = exchanges[s.at % Math.max(1, exchanges.length)];
                if (!exchange) continue;
                holds.release(exchange.key);
                expect((await exchange.answer).reply?.result).toBe(exchange.key);
                exchanges.splice(exchanges.indexOf(exchange), 1);
                add(exchange.user, -1);
                // The exchange leaves the count once its work is done, after its response.
                await waitFor(
                  () =>
                    exchange.user < 0 ||
                    users.sessionsOf(USERS[exchange.user]!) === countOf(exchange.user),
                  'the exchange to leave the count',
                );
              }
              for (const [i, user] of USERS.entries()) {
                expect(users.sessionsOf(user), user).toBe(countOf(i));
              }
              expect(users.users).toBe(model.size);
            }
            for (const conn of conns.splice(0)) await closeBoth(conn.socket, conn.session);
            for (const exchange of exchanges.splice(0)) {
              holds.release(exchange.key);
              await exchange.answer;
            }
            await waitFor(() => users.users === 0, 'every exchange to leave the count');
            expect(gatewayAdmission(gateway).connections).toBe(0);
          } finally {
            for (const exchange of exchanges) holds.release(exchange.key);
            for (const conn of conns) conn.socket.close();
            gateways.pop(); // this run's, closed here
            sockets.splice(0);
            await gateway.close();
          }
        },
      ),
      { numRuns: 25 },
    );
  }, 120_000);
});
