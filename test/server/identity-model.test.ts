// The identity of one connection as a state machine (docs/identity.md): random sequences of
// in-band authentication, calls, refreshes, the server's rpc.token requests and their answers,
// calls in flight and time passing, each checked against a small model of what the server must
// answer, ask and close with. The gateway's timers and clock are vitest's fake ones (the
// identity schedules with setTimeout and reads Date.now), so time moves only when a step says;
// the socket is real.
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import type { Session } from '../../src/server/session.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { token, tokenIdentity } from './identity-tokens.js';
import type { TestContext } from './identity-tokens.js';
import { openModelPeer, until } from './identity-model-peer.js';
import type { ModelPeer } from './identity-model-peer.js';

const UNAUTHENTICATED = -32010;
const REFRESH_AHEAD_MS = 300;
const IN_BAND_DEADLINE_MS = 3_000;
/** What the spec fixes: 3 refused attempts close 4401; calls in flight get up to 10 s. */
const MAX_REFUSALS = 3;
const EXPIRY_CLOSE_BOUND_MS = 10_000;
/** closeWhenIdle looks for the last call in flight every 10 ms of the (fake) clock. */
const IDLE_POLL_MS = 10;

// ---------------------------------------------------------------------------------------------
// The model

type Phase = 'pending' | 'authenticated' | 'expired' | 'closed';

interface Model {
  now: number;
  phase: Phase;
  user: string | undefined;
  refusals: number;
  /** The in-band deadline (pending only). */
  deadline: number;
  expiresAt: number | undefined;
  /** When the server asks for a fresh token; undefined once asked or when nothing expires. */
  askAt: number | undefined;
  /** Every rpc.token request the server must have sent, in order, with what became of it. */
  asks: { expiresAt: number; answered: boolean }[];
  /** Calls of ours the server is running (the test's `slow` method). */
  inFlight: number;
  /** While expired with calls in flight: the next idle check, and the 10 s bound. */
  pollAt: number;
  closeBy: number;
  closeCode: number | undefined;
}

type TokenKind = 'good' | 'refused' | 'other-user';
/** ms the token lives from when the hook reads it; undefined: it does not expire. */
type Ttl = number | undefined;

interface TokenSpec {
  kind: TokenKind;
  ttl: Ttl;
}

type Verdict = { ok: true } | { ok: false; reason: string; hookMessage?: string };

function userOf(m: Model, kind: TokenKind): string {
  const own = m.user ?? 'ann';
  return kind === 'other-user' ? (own === 'ann' ? 'bob' : 'ann') : own;
}

function tokenText(m: Model, spec: TokenSpec): string {
  return spec.kind === 'refused' ? 'garbage' : token({ user: userOf(m, spec.kind), ttl: spec.ttl });
}

/** What the server must decide about a token presented now (rpc.authenticate or rpc.token). */
function weigh(m: Model, spec: TokenSpec): Verdict {
  if (m.phase === 'expired') return { ok: false, reason: 'expired' };
  if (spec.kind === 'refused')
    return { ok: false, reason: 'invalid', hookMessage: 'invalid token' };
  if (m.phase === 'authenticated' && userOf(m, spec.kind) !== m.user) {
    return { ok: false, reason: 'user-changed' };
  }
  if (spec.ttl !== undefined && spec.ttl <= 0) return { ok: false, reason: 'expired' };
  return { ok: true };
}

/** A token accepted now: its identity is the session's, with new timers. */
function accept(m: Model, spec: TokenSpec): void {
  m.user = userOf(m, spec.kind);
  m.phase = 'authenticated';
  m.refusals = 0;
  if (spec.ttl === undefined) {
    m.expiresAt = undefined;
    m.askAt = undefined;
    return;
  }
  m.expiresAt = m.now + spec.ttl;
  // refreshAheadMs before expiry, but never sooner than half way through what is left.
  m.askAt = m.now + Math.max(spec.ttl - REFRESH_AHEAD_MS, spec.ttl / 2);
}

function close(m: Model, code: number): void {
  m.phase = 'closed';
  m.closeCode = code;
  m.askAt = undefined;
}

function expire(m: Model): void {
  m.phase = 'expired';
  m.askAt = undefined;
  if (m.inFlight === 0) return close(m, 4419);
  m.pollAt = m.now + IDLE_POLL_MS;
  m.closeBy = m.now + EXPIRY_CLOSE_BOUND_MS;
}

/** The next thing the clock makes happen, if any. */
function nextEvent(m: Model): { at: number; run: () => void } | undefined {
  switch (m.phase) {
    case 'pending':
      return { at: m.deadline, run: () => close(m, 4408) };
    case 'authenticated': {
      if (m.askAt !== undefined && (m.expiresAt === undefined || m.askAt < m.expiresAt)) {
        const expiresAt = m.expiresAt!;
        return {
          at: m.askAt,
          run: () => {
            m.asks.push({ expiresAt, answered: false });
            m.askAt = undefined;
          },
        };
      }
      if (m.expiresAt === undefined) return undefined;
      return { at: m.expiresAt, run: () => expire(m) };
    }
    case 'expired':
      return {
        at: m.pollAt,
        run: () => {
          if (m.inFlight === 0 || m.pollAt >= m.closeBy) close(m, 4419);
          else m.pollAt += IDLE_POLL_MS;
        },
      };
    case 'closed':
      return undefined;
  }
}

function advanceModel(m: Model, target: number): void {
  for (let event = nextEvent(m); event && event.at <= target; event = nextEvent(m)) {
    m.now = event.at;
    event.run();
  }
  m.now = target;
}

// ---------------------------------------------------------------------------------------------
// The system under test

interface Real {
  gateway: Gateway<TestContext>;
  peer: ModelPeer;
  /** The `slow` calls the server is running: resolving one answers it. */
  slow: (() => void)[];
  slowStarted: number;
  /** How many tokens the hook has weighed after the upgrade (in-band, refresh). */
  hookCalls: number;
}

function sessionOf(real: Real): Session<TestContext> | undefined {
  return [...real.gateway.sessions.values()][0];
}

/** Every close and rpc.token request so far as the model says, and the session's identity. */
async function agree(m: Model, real: Real): Promise<void> {
  expect(Date.now(), 'the fake clock and the model').toBe(m.now);
  // A round trip: whatever the server sent before it (a request, a close) has arrived.
  const pong = await real.peer.request('rpc.ping');
  if (m.phase === 'closed') {
    expect(pong, `closed with ${m.closeCode}`).toBeUndefined();
    expect(real.peer.closeFrame).toMatchObject({ code: m.closeCode });
  } else {
    expect(pong, `open, phase ${m.phase}`).toMatchObject({ result: 'pong' });
    const session = sessionOf(real)!;
    if (m.phase === 'authenticated') {
      expect(session.context.user).toBe(m.user);
      expect(session.expiresAt).toBe(m.expiresAt);
    }
  }
  const tokenRequests = real.peer.serverCalls.filter((call) => call.method === 'rpc.token');
  expect(tokenRequests.map((call) => call.params)).toEqual(
    m.asks.map(({ expiresAt }) => ({ expiresAt })),
  );
}

function expectRefusal(reply: unknown, reason: string, hookMessage?: string): void {
  expect(reply).toMatchObject({ error: { code: UNAUTHENTICATED, data: { reason } } });
  if (hookMessage !== undefined) {
    expect(reply).toMatchObject({ error: { message: hookMessage, data: { status: 401 } } });
  }
}

type Command = fc.AsyncCommand<Model, Real, false>;
const open = (m: Model): boolean => m.phase !== 'closed';

class Authenticate implements Command {
  constructor(readonly spec: TokenSpec) {}
  check = open;
  async run(m: Model, real: Real): Promise<void> {
    const verdict = weigh(m, this.spec);
    const reply = await real.peer.request('rpc.authenticate', { token: tokenText(m, this.spec) });
    if (verdict.ok) {
      accept(m, this.spec);
      const result: Record<string, unknown> = { sessionId: sessionOf(real)!.id, user: m.user };
      if (m.expiresAt !== undefined) result['expiresAt'] = m.expiresAt;
      expect(reply).toEqual({ jsonrpc: '2.0', id: expect.any(Number), result });
    } else {
      expectRefusal(reply, verdict.reason, verdict.hookMessage);
      if (m.phase === 'pending' && ++m.refusals >= MAX_REFUSALS) close(m, 4401);
    }
    await agree(m, real);
  }
  toString = (): string => `authenticate(${this.spec.kind}, ttl ${this.spec.ttl})`;
}

class OrdinaryCall implements Command {
  check = open;
  async run(m: Model, real: Real): Promise<void> {
    const reply = await real.peer.request('whoami');
    if (m.phase === 'authenticated') expect(reply).toMatchObject({ result: m.user });
    else {
      expectRefusal(reply, m.phase === 'pending' ? 'authentication required' : 'expired');
    }
    await agree(m, real);
  }
  toString = (): string => 'call';
}

/** A call the server keeps running until ReleaseCall: the calls in flight at expiry. */
class StartSlowCall implements Command {
  constructor(readonly replies: Promise<unknown>[]) {}
  check = open;
  async run(m: Model, real: Real): Promise<void> {
    const reply = real.peer.request('slow');
    if (m.phase === 'authenticated') {
      m.inFlight++;
      // Awaited by ReleaseCall; a sequence that fails first leaves it unawaited, not unhandled.
      reply.catch(() => undefined);
      this.replies.push(reply);
      const started = real.slowStarted + 1;
      await until(() => real.slowStarted >= started, 'the slow call on the server');
    } else {
      expectRefusal(await reply, m.phase === 'pending' ? 'authentication required' : 'expired');
    }
    await agree(m, real);
  }
  toString = (): string => 'start a call in flight';
}

class ReleaseCall implements Command {
  constructor(readonly replies: Promise<unknown>[]) {}
  check = (m: Model): boolean => open(m) && m.inFlight > 0;
  async run(m: Model, real: Real): Promise<void> {
    m.inFlight--;
    real.slow.shift()!();
    // Answered, even after the identity expired: the close waits for it.
    expect(await this.replies.shift()).toMatchObject({ result: 'done' });
    await agree(m, real);
  }
  toString = (): string => 'answer the oldest call in flight';
}

type Moment =
  | 'a little'
  | 'just before the ask'
  | 'to the ask'
  | 'just before expiry'
  | 'to expiry'
  | 'to the in-band deadline'
  | 'past every bound';

class PassTime implements Command {
  constructor(readonly moment: Moment) {}
  check = open;
  async run(m: Model, real: Real): Promise<void> {
    const target = this.target(m);
    const step = target - m.now;
    advanceModel(m, target);
    await vi.advanceTimersByTimeAsync(step);
    await agree(m, real);
    // Calls in flight when the connection closed are never answered.
    if (m.phase === 'closed') m.inFlight = 0;
  }
  private target(m: Model): number {
    const at = (time: number | undefined, offset = 0): number =>
      time === undefined ? m.now + 50 : Math.max(m.now, time + offset);
    switch (this.moment) {
      case 'a little':
        return m.now + 50;
      case 'just before the ask':
        return at(m.askAt, -1);
      case 'to the ask':
        return at(m.askAt);
      case 'just before expiry':
        return at(m.expiresAt, -1);
      case 'to expiry':
        return at(m.expiresAt);
      case 'to the in-band deadline':
        return at(m.phase === 'pending' ? m.deadline : undefined);
      case 'past every bound':
        return m.now + EXPIRY_CLOSE_BOUND_MS + IN_BAND_DEADLINE_MS;
    }
  }
  toString = (): string => `time passes ${this.moment}`;
}

type Answer = TokenSpec | 'error';

/** The client answers the oldest rpc.token request it has not answered. */
class AnswerTokenRequest implements Command {
  constructor(readonly answer: Answer) {}
  check = (m: Model): boolean => open(m) && m.asks.some((ask) => !ask.answered);
  async run(m: Model, real: Real): Promise<void> {
    const index = m.asks.findIndex((ask) => !ask.answered);
    const ask = m.asks[index]!;
    ask.answered = true;
    const call = real.peer.serverCalls.filter((c) => c.method === 'rpc.token')[index]!;
    // The server gave up on the request at the expiry it named: a late answer changes nothing.
    // Once the identity has expired (a re-authentication may have made it expire sooner than
    // the request named) the server refuses the token without the hook.
    const heard = m.now < ask.expiresAt && m.phase !== 'expired';
    if (this.answer === 'error') {
      real.peer.answer(call, { error: { code: -32000, message: 'no token to give' } });
    } else {
      const spec = this.answer;
      real.peer.answer(call, { result: { token: tokenText(m, spec) } });
      if (heard) {
        const weighed = real.hookCalls + 1;
        await until(() => real.hookCalls >= weighed, 'the hook weighing the token');
        const verdict = weigh(m, spec);
        if (verdict.ok) {
          accept(m, spec);
          const expiresAt = m.expiresAt;
          await until(() => sessionOf(real)?.expiresAt === expiresAt, 'the refreshed identity');
        }
      }
    }
    await agree(m, real);
  }
  toString = (): string =>
    `answer rpc.token with ${this.answer === 'error' ? 'an error' : `${this.answer.kind}, ttl ${this.answer.ttl}`}`;
}

// ---------------------------------------------------------------------------------------------
// Generators and the property

const ttl = fc.constantFrom<Ttl>(undefined, 0, 200, 500, 1_000, 2_000);
const tokenSpec = fc.record({
  kind: fc.constantFrom<TokenKind>('good', 'good', 'refused', 'other-user'),
  ttl,
});

function commands(replies: Promise<unknown>[]) {
  return fc.commands<Model, Real, false>(
    [
      tokenSpec.map((spec) => new Authenticate(spec)),
      // Refusals in a row are what close an in-band connection (4401): make them common.
      fc.constant(new Authenticate({ kind: 'refused', ttl: 1_000 })),
      fc.constant(new OrdinaryCall()),
      fc.constant(new StartSlowCall(replies)),
      fc.constant(new ReleaseCall(replies)),
      fc
        .constantFrom<Moment>(
          'a little',
          'just before the ask',
          'to the ask',
          'to the ask',
          'just before expiry',
          'to expiry',
          'to expiry',
          'to the in-band deadline',
          'past every bound',
        )
        .map((moment) => new PassTime(moment)),
      fc
        .oneof(
          tokenSpec.map((spec): Answer => spec),
          fc.constant<Answer>('error'),
        )
        .map((answer) => new AnswerTokenRequest(answer)),
    ],
    { maxCommands: 40, size: 'large' },
  );
}

/** How the connection starts: in-band (pending), or authenticated at the upgrade with a Bearer token. */
const start = fc.oneof(
  fc.constant<{ bearer?: Ttl }>({}),
  ttl.filter((t) => t !== 0).map((bearer) => ({ bearer })),
);

let running: RunningGateway<TestContext> | undefined;
let peer: ModelPeer | undefined;
afterEach(async () => {
  vi.useRealTimers();
  peer?.close();
  await running?.gateway.close();
  running = undefined;
  peer = undefined;
});

async function runSequence(
  initial: { bearer?: Ttl },
  cmds: Iterable<Command>,
  replies: Promise<unknown>[],
) {
  vi.useRealTimers();
  peer?.close();
  await running?.gateway.close();
  const identity = tokenIdentity({
    inBand: true,
    inBandDeadlineMs: IN_BAND_DEADLINE_MS,
    refreshAheadMs: REFRESH_AHEAD_MS,
  });
  const real = { slow: [], slowStarted: 0, hookCalls: 0 } as unknown as Real;
  running = await startGateway<TestContext>({
    ...identity,
    authenticate: (request) => {
      if (request.phase !== 'upgrade') real.hookCalls++;
      return identity.authenticate!(request);
    },
  });
  running.gateway.method('whoami', (_params, ctx) => ctx.session.context.user);
  running.gateway.method('slow', () => {
    real.slowStarted++;
    return new Promise<string>((resolve) => real.slow.push(() => resolve('done')));
  });
  // Only the clocks and the timers the identity uses: sockets and setImmediate stay real. The
  // monotonic clock too: a call's timeout is a deadline on it (performance.now) whose timer is
  // a setTimeout, and the two must move together.
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] });
  const now = Date.now();
  const model: Model = {
    now,
    phase: 'pending',
    user: undefined,
    refusals: 0,
    deadline: now + IN_BAND_DEADLINE_MS,
    expiresAt: undefined,
    askAt: undefined,
    asks: [],
    inFlight: 0,
    pollAt: 0,
    closeBy: 0,
    closeCode: undefined,
  };
  let headers: Record<string, string> | undefined;
  if ('bearer' in initial) {
    const spec: TokenSpec = { kind: 'good', ttl: initial.bearer };
    headers = { authorization: `Bearer ${tokenText(model, spec)}` };
    accept(model, spec);
  }
  peer = await openModelPeer(running.url, headers);
  real.gateway = running.gateway;
  real.peer = peer;
  replies.length = 0;
  await fc.asyncModelRun(() => ({ model, real }), cmds);
}

describe('the identity of a connection, against its model', () => {
  it('answers, asks for tokens and closes as the model says', async () => {
    const replies: Promise<unknown>[] = [];
    await fc.assert(
      fc.asyncProperty(start, commands(replies), (initial, cmds) =>
        runSequence(initial, cmds, replies),
      ),
      { numRuns: 100 },
    );
  }, 120_000);
});
