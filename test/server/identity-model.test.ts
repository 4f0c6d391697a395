// The identity of one connection as a state machine (docs/identity.md): random sequences of
// in-band authentication, calls, refreshes, the server's rpc.token requests and their answers,
// calls in flight and time passing, each checked against a small model of what the server must
// answer, ask and close with. The gateway's timers and clock are vitest's fake ones (the
// identity schedules with setTimeout and reads Date.now), so time moves only when a step says;
// the socket is real. Steps push output too (a publish to the topic the connection subscribed
// at authentication, session.notify, notifyUser), and the model says which of it the client
// receives, in order: nothing its expired identity authorized, but what was held while a
// refresh sent before the expiry was checked, once that refresh is accepted. Some tokens' checks
// wait for a step of their own (a slow hook), so the expiry can overtake them.
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Gateway } from '../../src/server/gateway.js';
import type { Session } from '../../src/server/session.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { token, tokenIdentity } from './identity-tokens.js';
import type { TestContext } from './identity-tokens.js';
import { bounded, openModelPeer, until } from './identity-model-peer.js';
import type { ModelPeer } from './identity-model-peer.js';
import type { RawReply } from './raw-rpc.js';

const UNAUTHENTICATED = -32010;
const SERVER_BUSY = -32000;
const REFRESH_AHEAD_MS = 300;
const IN_BAND_DEADLINE_MS = 3_000;
/**
 * limits.authenticateTimeoutMs: how long one check may take, and how long an expired identity
 * waits for the refreshes sent before its expiry. Short beside the tokens' lives, so that both
 * bounds are reached in a sequence.
 */
const CHECK_TIMEOUT_MS = 700;
/** After a check that timed out, tokens are refused without the hook for up to 10 timeouts. */
const HOOK_HANG_MS = 10 * CHECK_TIMEOUT_MS;
/** What the spec fixes: 3 refused attempts close 4401; calls in flight get up to 10 s. */
const MAX_REFUSALS = 3;
/** One token being checked and MAX_WAITING_AUTHENTICATIONS (2) behind it: more are -32000. */
const MAX_QUEUED = 3;
const EXPIRY_CLOSE_BOUND_MS = 10_000;
/** closeWhenIdle looks for the last call in flight every 10 ms of the (fake) clock. */
const IDLE_POLL_MS = 10;
/** The topic the connection subscribes to once authenticated. */
const TOPIC = 'news.m';

// ---------------------------------------------------------------------------------------------
// The model

type Phase = 'pending' | 'authenticated' | 'expired' | 'closed';

/**
 * A timer of the server's: `seq` orders those due at the same time, as the fake clock does (the
 * one created first runs first).
 */
interface Timer {
  at: number;
  seq: number;
}

/** A token in the server's queue: checked one at a time, in the order they came. */
interface Check {
  spec: TokenSpec;
  /** The user its text names, as it was sent. */
  user: string;
  /** It came before the identity expired: it may still renew it. */
  early: boolean;
  /** Its hook waits for FinishCheck. */
  slow: boolean;
  /** The reply to its rpc.authenticate; undefined for an answer to rpc.token. */
  reply: Promise<RawReply | undefined> | undefined;
  /** While its (slow) hook runs: when the server gives up on it. */
  timeout: Timer | undefined;
}

/** What the server must answer a token with. */
type Outcome =
  { ok: true } | { ok: false; code: number; reason?: string; message?: string; status?: number };

interface Model {
  now: number;
  /** The last timer's seq. */
  seq: number;
  phase: Phase;
  user: string | undefined;
  refusals: number;
  /** The in-band deadline (pending only). */
  deadline: number;
  expiresAt: number | undefined;
  /** When the server asks for a fresh token; undefined once asked or when nothing expires. */
  askAt: number | undefined;
  /** The seq of the identity's timers (the ask, then the expiry). */
  identitySeq: number;
  /** Every rpc.token request the server must have sent, in order, with what became of it. */
  asks: { expiresAt: number; answered: boolean }[];
  /** Calls of ours the server is running (the test's `slow` method). */
  inFlight: number;
  /** While expired with calls in flight: the next idle check, and the 10 s bound. */
  pollAt: number;
  pollSeq: number;
  closeBy: number;
  closeCode: number | undefined;
  /** The tokens the server has taken and not answered yet, the one being checked first. */
  queue: Check[];
  /** Tokens answered since the last look, with what their replies must say. */
  answered: { reply: Promise<RawReply | undefined>; outcome: Outcome }[];
  /** Runs of the hook the server must have made after the upgrade, and those of slow tokens. */
  hookRuns: number;
  slowRuns: number;
  /** A check timed out: tokens are refused without the hook until then. */
  hanging: Timer | undefined;
  /**
   * Expired with tokens from before the expiry being checked: the output is held, and the
   * connection closes unless one of them renews the identity by `renewBy`.
   */
  closeOnceChecked: boolean;
  holding: boolean;
  renewBy: Timer | undefined;
  /** Past renewBy: no token renews the identity any more. */
  closing: boolean;
  /** Subscribed to TOPIC (once authenticated). */
  subscribed: boolean;
  /** What was pushed so far, and what of it the client must have received, in order. */
  pushes: number;
  received: string[];
  /** Pushed while held: sent once a renewal is accepted, else never. */
  held: string[];
}

type TokenKind = 'good' | 'refused' | 'other-user';
/** ms the token lives from when the hook reads it; undefined: it does not expire. */
type Ttl = number | undefined;

interface TokenSpec {
  kind: TokenKind;
  ttl: Ttl;
}

function userOf(m: Model, kind: TokenKind): string {
  const own = m.user ?? 'ann';
  return kind === 'other-user' ? (own === 'ann' ? 'bob' : 'ann') : own;
}

/** A slow token's check waits for FinishCheck: the hook of the test reads the mark. */
const SLOW_MARK = ';slow=1';

function tokenText(m: Model, spec: TokenSpec, slow = false): string {
  const text =
    spec.kind === 'refused' ? 'garbage' : token({ user: userOf(m, spec.kind), ttl: spec.ttl });
  return slow ? text + SLOW_MARK : text;
}

function timer(m: Model, at: number): Timer {
  return { at, seq: ++m.seq };
}

const refused = (reason: string, more: { message?: string; status?: number } = {}): Outcome => ({
  ok: false,
  code: UNAUTHENTICATED,
  reason,
  ...more,
});

/** What the server answers a token with once the hook has accepted or refused it. */
function weighed(m: Model, check: Check): Outcome {
  const { spec } = check;
  if (spec.kind === 'refused') return refused('invalid', { message: 'invalid token', status: 401 });
  if (m.phase !== 'pending' && check.user !== m.user) return refused('user-changed');
  if (spec.ttl !== undefined && spec.ttl <= 0) return refused('expired');
  // Expired meanwhile: only a token from before the expiry renews it, and only in time.
  if (m.phase === 'expired' && (!check.early || m.closing)) return refused('expired');
  return { ok: true };
}

/** A token accepted now: its identity is the session's, with new timers. */
function accept(m: Model, user: string, ttl: Ttl): void {
  const renewing = m.phase === 'expired';
  m.user = user;
  m.phase = 'authenticated';
  m.refusals = 0;
  m.identitySeq = ++m.seq;
  m.seq++;
  if (renewing) {
    // What was held since the expiry goes out, in order, before anything after the renewal.
    m.received.push(...m.held);
    m.held = [];
    m.holding = false;
    m.renewBy = undefined;
  }
  if (ttl === undefined) {
    m.expiresAt = undefined;
    m.askAt = undefined;
    return;
  }
  m.expiresAt = m.now + ttl;
  // refreshAheadMs before expiry, but never sooner than half way through what is left.
  m.askAt = m.now + Math.max(ttl - REFRESH_AHEAD_MS, ttl / 2);
}

function close(m: Model, code: number): void {
  m.phase = 'closed';
  m.closeCode = code;
  m.askAt = undefined;
  m.holding = false;
  m.held = [];
  m.renewBy = undefined;
  m.hanging = undefined;
  // Tokens not answered by the close never are.
  m.queue = [];
}

function expire(m: Model): void {
  m.phase = 'expired';
  m.askAt = undefined;
  if (m.queue.some((check) => check.early)) {
    m.closeOnceChecked = true;
    m.holding = true;
    m.renewBy = timer(m, m.now + CHECK_TIMEOUT_MS);
    return;
  }
  closeExpired(m);
}

/**
 * The client's calls the server has not answered: the `slow` ones, and the rpc.authenticate
 * calls whose tokens are in the queue (plus `answering`, one being answered now).
 */
function callsInFlight(m: Model, answering = 0): number {
  return m.inFlight + m.queue.filter((check) => check.reply !== undefined).length + answering;
}

/**
 * Close once the calls in flight are answered (an rpc.authenticate whose token is checked is
 * one); what was held is never sent.
 */
function closeExpired(m: Model, answering = 0): void {
  m.holding = false;
  m.held = [];
  m.renewBy = undefined;
  if (callsInFlight(m, answering) === 0) return close(m, 4419);
  m.pollAt = m.now + IDLE_POLL_MS;
  m.pollSeq = ++m.seq;
  m.closeBy = m.now + EXPIRY_CLOSE_BOUND_MS;
}

/** The token being checked is answered with `outcome`. */
function finish(m: Model, check: Check, outcome: Outcome): void {
  m.queue.shift();
  if (check.reply) m.answered.push({ reply: check.reply, outcome });
  if (outcome.ok) accept(m, check.user, check.spec.ttl);
  else if (m.phase === 'pending' && ++m.refusals >= MAX_REFUSALS) close(m, 4401);
  // The last token from before the expiry is answered: the expiry's close stops waiting.
  if (check.early && !m.queue.some((c) => c.early) && m.closeOnceChecked) {
    m.closeOnceChecked = false;
    // Its own rpc.authenticate is answered after this: the close waits for it.
    if (m.phase === 'expired') closeExpired(m, check.reply ? 1 : 0);
  }
}

/** The server takes the tokens in turn, until one waits for its (slow) hook. */
function runQueue(m: Model): void {
  for (let head = m.queue[0]; head && !head.timeout && m.phase !== 'closed'; head = m.queue[0]) {
    if (m.phase === 'expired' && (!head.early || m.closing)) {
      finish(m, head, refused('expired'));
    } else if (m.hanging) {
      finish(m, head, refused('unavailable', { message: 'Authentication timed out', status: 503 }));
    } else {
      m.hookRuns++;
      if (!head.slow) finish(m, head, weighed(m, head));
      else {
        m.slowRuns++;
        head.timeout = timer(m, m.now + CHECK_TIMEOUT_MS);
        return;
      }
    }
  }
}

/** A token the client sent now: -32000 when the queue is full, else taken in turn. */
function enqueue(m: Model, check: Omit<Check, 'early' | 'timeout'>): boolean {
  if (m.queue.length >= MAX_QUEUED) return false;
  m.queue.push({ ...check, early: m.phase !== 'expired', timeout: undefined });
  runQueue(m);
  return true;
}

/** The next thing the clock makes happen, if any: the earliest, the first made of a tie. */
function nextEvent(m: Model): (Timer & { run: () => void }) | undefined {
  const due: (Timer & { run: () => void })[] = [];
  switch (m.phase) {
    case 'pending':
      due.push({ at: m.deadline, seq: 0, run: () => close(m, 4408) });
      break;
    case 'authenticated': {
      if (m.askAt !== undefined && (m.expiresAt === undefined || m.askAt < m.expiresAt)) {
        const expiresAt = m.expiresAt!;
        due.push({
          at: m.askAt,
          seq: m.identitySeq,
          run: () => {
            m.asks.push({ expiresAt, answered: false });
            m.askAt = undefined;
          },
        });
      }
      if (m.expiresAt !== undefined) {
        due.push({ at: m.expiresAt, seq: m.identitySeq + 1, run: () => expire(m) });
      }
      break;
    }
    case 'expired':
      if (m.renewBy) {
        // The refreshes from before the expiry are not all answered in time.
        due.push({
          ...m.renewBy,
          run: () => {
            m.closeOnceChecked = false;
            m.closing = true;
            closeExpired(m);
          },
        });
      } else if (!m.holding) {
        due.push({
          at: m.pollAt,
          seq: m.pollSeq,
          run: () => {
            if (callsInFlight(m) === 0 || m.pollAt >= m.closeBy) close(m, 4419);
            else {
              m.pollAt += IDLE_POLL_MS;
              m.pollSeq = ++m.seq;
            }
          },
        });
      }
      break;
    case 'closed':
      return undefined;
  }
  const head = m.queue[0];
  if (head?.timeout) {
    // The hook did not settle in time: refused, and its run is left hanging.
    due.push({
      ...head.timeout,
      run: () => {
        head.timeout = undefined;
        m.hanging = timer(m, m.now + HOOK_HANG_MS);
        finish(
          m,
          head,
          refused('unavailable', { message: 'Authentication timed out', status: 503 }),
        );
        runQueue(m);
      },
    });
  }
  if (m.hanging) due.push({ ...m.hanging, run: () => (m.hanging = undefined) });
  return due.sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
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
  /** The slow tokens' hook runs, in the order they started: resolving one lets it go on. */
  gates: (() => void)[];
}

function sessionOf(real: Real): Session<TestContext> | undefined {
  return [...real.gateway.sessions.values()][0];
}

/** What the client received of what was pushed, as the model writes it. */
function receivedBy(peer: ModelPeer): string[] {
  return peer.notifications.map(({ method, params }) => {
    const p = params as { result?: unknown; n?: unknown } | undefined;
    if (method === 'subscription' || method === 'rpc.subscription') return `m:${String(p?.result)}`;
    if (method === 'note') return `n:${String(p?.n)}`;
    if (method === 'user-note') return `u:${String(p?.n)}`;
    return `unexpected ${method}`;
  });
}

/** Every close, rpc.token request and push received so far as the model says, and the identity. */
async function agree(m: Model, real: Real): Promise<void> {
  expect(Date.now(), 'the fake clock and the model').toBe(m.now);
  if (m.phase === 'closed') {
    // Whatever the server sent before its close has arrived once the close has.
    await bounded(real.peer.closed, `the close ${m.closeCode}`);
    expect(real.peer.closeFrame).toMatchObject({ code: m.closeCode });
  } else {
    // A round trip: whatever the server sent before it (a request, a push, a close) has arrived.
    const pong = await real.peer.request('rpc.ping');
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
  expect(receivedBy(real.peer), 'what was pushed and reached the client').toEqual(m.received);
}

/**
 * Once the server has done what the model says a step made it do: the hook runs, the replies to
 * the tokens answered (as the model says), the new identity, the subscription of a connection
 * that has just authenticated; then `agree`.
 */
async function settle(m: Model, real: Real): Promise<void> {
  await until(() => real.hookCalls >= m.hookRuns, 'the hook runs');
  expect(real.hookCalls, 'runs of the hook').toBe(m.hookRuns);
  for (const { reply, outcome } of m.answered.splice(0)) {
    const got = await reply;
    // A reply the close overtook.
    if (got === undefined) expect(m.phase, 'a token left unanswered').toBe('closed');
    else expectOutcome(got, outcome, m, real);
  }
  if (m.phase === 'authenticated') {
    const expiresAt = m.expiresAt;
    await until(() => sessionOf(real)?.expiresAt === expiresAt, 'the identity of the model');
    if (!m.subscribed) {
      expect(await real.peer.request('subscribe', [TOPIC])).toMatchObject({
        result: expect.any(String),
      });
      m.subscribed = true;
    }
  }
  await agree(m, real);
}

function expectOutcome(reply: RawReply, outcome: Outcome, m: Model, real: Real): void {
  if (outcome.ok) {
    expect(reply, 'a token accepted').toMatchObject({
      result: { sessionId: sessionOf(real)?.id ?? expect.any(String), user: m.user },
    });
    return;
  }
  const { code, reason, message, status } = outcome;
  expect(reply, `a token refused (${reason ?? code})`).toMatchObject({ error: { code } });
  if (reason !== undefined) expect(reply).toMatchObject({ error: { data: { reason } } });
  if (message !== undefined) expect(reply).toMatchObject({ error: { message } });
  if (status !== undefined) expect(reply).toMatchObject({ error: { data: { status } } });
}

function expectRefusal(reply: unknown, reason: string): void {
  expect(reply).toMatchObject({ error: { code: UNAUTHENTICATED, data: { reason } } });
}

type Command = fc.AsyncCommand<Model, Real, false>;
const open = (m: Model): boolean => m.phase !== 'closed';

/** rpc.authenticate: in-band, or a refresh; a slow one's check waits for FinishCheck. */
class Authenticate implements Command {
  constructor(
    readonly spec: TokenSpec,
    readonly slow = false,
  ) {}
  // A slow token only as a refresh: in-band checks are not part of the expiry's rule.
  check = (m: Model): boolean => open(m) && (!this.slow || m.phase !== 'pending');
  async run(m: Model, real: Real): Promise<void> {
    const text = tokenText(m, this.spec, this.slow);
    const reply = real.peer.request('rpc.authenticate', { token: text });
    // Awaited by settle; a sequence that fails first leaves it unawaited, not unhandled.
    reply.catch(() => undefined);
    const user = userOf(m, this.spec.kind);
    if (!enqueue(m, { spec: this.spec, user, slow: this.slow, reply })) {
      expect(await reply).toMatchObject({ error: { code: SERVER_BUSY } });
    }
    await settle(m, real);
  }
  toString = (): string =>
    `authenticate(${this.spec.kind}, ttl ${this.spec.ttl}${this.slow ? ', slow' : ''})`;
}

/** The slow hook run of the token being checked settles: accepted or refused as its text says. */
class FinishCheck implements Command {
  check = (m: Model): boolean => open(m) && m.queue[0]?.timeout !== undefined;
  async run(m: Model, real: Real): Promise<void> {
    const head = m.queue[0]!;
    head.timeout = undefined;
    // The latest slow run is the one being checked: those before it finished or hang.
    expect(real.gates.length, 'slow hook runs').toBe(m.slowRuns);
    real.gates[m.slowRuns - 1]!();
    finish(m, head, weighed(m, head));
    runQueue(m);
    await settle(m, real);
  }
  toString = (): string => 'the slow check ends';
}

class OrdinaryCall implements Command {
  check = open;
  async run(m: Model, real: Real): Promise<void> {
    const reply = await real.peer.request('whoami');
    if (m.phase === 'authenticated') expect(reply).toMatchObject({ result: m.user });
    else {
      expectRefusal(reply, m.phase === 'pending' ? 'authentication required' : 'expired');
    }
    await settle(m, real);
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
    await settle(m, real);
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
    await settle(m, real);
  }
  toString = (): string => 'answer the oldest call in flight';
}

type PushKind = 'publish' | 'notify' | 'notifyUser';

/** The server pushes to the connection: one message of its topic, session.notify, notifyUser. */
class Push implements Command {
  constructor(readonly kind: PushKind) {}
  check = open;
  async run(m: Model, real: Real): Promise<void> {
    const n = ++m.pushes;
    const session = sessionOf(real)!;
    switch (this.kind) {
      case 'publish':
        await real.gateway.publish(TOPIC, String(n));
        break;
      case 'notify':
        session.notify('note', { n });
        break;
      case 'notifyUser':
        await real.gateway.notifyUser(m.user ?? 'ann', 'user-note', { n });
        break;
    }
    // An unauthenticated connection is sent nothing, and has no subscription.
    const sent = m.phase !== 'pending' && (this.kind !== 'publish' || m.subscribed);
    const item = `${{ publish: 'm', notify: 'n', notifyUser: 'u' }[this.kind]}:${n}`;
    if (sent && m.phase === 'authenticated') m.received.push(item);
    // Expired: held while a refresh from before the expiry is checked, else never sent.
    else if (sent && m.holding) m.held.push(item);
    await settle(m, real);
  }
  toString = (): string => `push (${this.kind})`;
}

type Moment =
  | 'a little'
  | 'just before the ask'
  | 'to the ask'
  | 'just before expiry'
  | 'to expiry'
  | 'to the in-band deadline'
  | "to the check's timeout"
  | 'to the renewal deadline'
  | 'past every bound';

class PassTime implements Command {
  constructor(readonly moment: Moment) {}
  check = open;
  async run(m: Model, real: Real): Promise<void> {
    const target = this.target(m);
    const step = target - m.now;
    advanceModel(m, target);
    await vi.advanceTimersByTimeAsync(step);
    await settle(m, real);
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
      case "to the check's timeout":
        return at(m.queue[0]?.timeout?.at);
      case 'to the renewal deadline':
        return at(m.renewBy?.at);
      case 'past every bound':
        return m.now + EXPIRY_CLOSE_BOUND_MS + IN_BAND_DEADLINE_MS;
    }
  }
  toString = (): string => `time passes ${this.moment}`;
}

type Answer = { spec: TokenSpec; slow: boolean } | 'error';

/** The client answers the oldest rpc.token request it has not answered. */
class AnswerTokenRequest implements Command {
  constructor(readonly answer: Answer) {}
  check = (m: Model): boolean => open(m) && m.asks.some((ask) => !ask.answered);
  async run(m: Model, real: Real): Promise<void> {
    const index = m.asks.findIndex((ask) => !ask.answered);
    const ask = m.asks[index]!;
    ask.answered = true;
    const call = real.peer.serverCalls.filter((c) => c.method === 'rpc.token')[index]!;
    if (this.answer === 'error') {
      real.peer.answer(call, { error: { code: -32000, message: 'no token to give' } });
    } else {
      const { spec, slow } = this.answer;
      real.peer.answer(call, { result: { token: tokenText(m, spec, slow) } });
      // The server gave up on the request at the expiry it named: a late answer changes nothing.
      // A token it takes goes in turn, as rpc.authenticate's (-32000 past the queue's bound,
      // which the client of rpc.token is not told).
      if (m.now < ask.expiresAt) {
        enqueue(m, { spec, user: userOf(m, spec.kind), slow, reply: undefined });
      }
    }
    await settle(m, real);
  }
  toString = (): string =>
    `answer rpc.token with ${this.answer === 'error' ? 'an error' : `${this.answer.spec.kind}, ttl ${this.answer.spec.ttl}${this.answer.slow ? ', slow' : ''}`}`;
}

// ---------------------------------------------------------------------------------------------
// Generators and the property

const ttl = fc.constantFrom<Ttl>(undefined, 0, 200, 500, 1_000, 2_000);
const tokenSpec = fc.record({
  kind: fc.constantFrom<TokenKind>('good', 'good', 'refused', 'other-user'),
  ttl,
});

const slowRefresh = fc
  .record({ kind: fc.constantFrom<TokenKind>('good', 'good', 'refused', 'other-user'), ttl })
  .map((spec) => new Authenticate(spec, true));
const push = fc
  .constantFrom<PushKind>('publish', 'publish', 'notify', 'notifyUser')
  .map((kind) => new Push(kind));

function commands(replies: Promise<unknown>[]) {
  return fc.commands<Model, Real, false>(
    [
      tokenSpec.map((spec) => new Authenticate(spec)),
      // Refusals in a row are what close an in-band connection (4401): make them common.
      fc.constant(new Authenticate({ kind: 'refused', ttl: 1_000 })),
      // Refreshes the expiry can overtake, their ends and pushes: listed twice to come often.
      slowRefresh,
      slowRefresh,
      fc.constant(new FinishCheck()),
      fc.constant(new FinishCheck()),
      push,
      fc.constant(new OrdinaryCall()),
      fc.constant(new StartSlowCall(replies)),
      fc.constant(new ReleaseCall(replies)),
      push,
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
          "to the check's timeout",
          'to the renewal deadline',
          'past every bound',
        )
        .map((moment) => new PassTime(moment)),
      fc
        .oneof(
          fc.record({ spec: tokenSpec, slow: fc.boolean() }).map((answer): Answer => answer),
          fc.constant<Answer>('error'),
        )
        .map((answer) => new AnswerTokenRequest(answer)),
    ],
    { maxCommands: 40, size: 'large' },
  );
}

/** How the connection starts: in-band (pending), or authenticated at the upgrade with a Bearer token. */
const start = fc.oneof(
  { arbitrary: fc.constant<{ bearer?: Ttl }>({}), weight: 1 },
  // Mostly one that expires: the expiry and its refreshes are where output is held.
  {
    arbitrary: fc
      .constantFrom<Ttl>(undefined, 500, 1_000, 1_000, 2_000)
      .map((bearer) => ({ bearer })),
    weight: 2,
  },
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
  const real = { slow: [], slowStarted: 0, hookCalls: 0, gates: [] } as unknown as Real;
  running = await startGateway<TestContext>({
    ...identity,
    limits: { authenticateTimeoutMs: CHECK_TIMEOUT_MS },
    authenticate: async (request) => {
      if (request.phase !== 'upgrade') {
        real.hookCalls++;
        if (request.token?.endsWith(SLOW_MARK)) {
          await new Promise<void>((resolve) => real.gates.push(resolve));
        }
      }
      return identity.authenticate!(request);
    },
  });
  running.gateway.topic('news.*');
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
    seq: 0,
    phase: 'pending',
    user: undefined,
    refusals: 0,
    deadline: now + IN_BAND_DEADLINE_MS,
    expiresAt: undefined,
    askAt: undefined,
    identitySeq: 0,
    asks: [],
    inFlight: 0,
    pollAt: 0,
    pollSeq: 0,
    closeBy: 0,
    closeCode: undefined,
    queue: [],
    answered: [],
    hookRuns: 0,
    slowRuns: 0,
    hanging: undefined,
    closeOnceChecked: false,
    holding: false,
    renewBy: undefined,
    closing: false,
    subscribed: false,
    pushes: 0,
    received: [],
    held: [],
  };
  let headers: Record<string, string> | undefined;
  if ('bearer' in initial) {
    const spec: TokenSpec = { kind: 'good', ttl: initial.bearer };
    headers = { authorization: `Bearer ${tokenText(model, spec)}` };
    accept(model, userOf(model, 'good'), spec.ttl);
  }
  peer = await openModelPeer(running.url, headers);
  real.gateway = running.gateway;
  real.peer = peer;
  replies.length = 0;
  if (model.phase === 'authenticated') {
    // Subscribed at authentication: what the topic is sent reaches the connection.
    expect(await peer.request('subscribe', [TOPIC])).toMatchObject({ result: expect.any(String) });
    model.subscribed = true;
  }
  await fc.asyncModelRun(() => ({ model, real }), cmds);
}

/**
 * Runs of the property: FC_RUNS to hunt with more. 300: output held past an expiry, then
 * released by an accepted refresh, comes up a few times in that many (about once in 100).
 */
const RUNS = Number(process.env['FC_RUNS'] ?? 300);

describe('the identity of a connection, against its model', () => {
  it(
    'answers, asks for tokens, closes and passes on pushed output as the model says',
    async () => {
      const replies: Promise<unknown>[] = [];
      await fc.assert(
        fc.asyncProperty(start, commands(replies), (initial, cmds) =>
          runSequence(initial, cmds, replies),
        ),
        { numRuns: RUNS },
      );
    },
    120_000 + RUNS * 1_000,
  );
});
