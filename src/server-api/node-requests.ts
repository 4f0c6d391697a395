// The server API's requests that span the gateways sharing a broker: a call to a client
// connected to any node (by session or by user), and a topic's subscriber count. A request/reply
// over the gateway's node channel (directed messaging, see SessionRouter.openChannel): a request
// goes to the node a session id names, or to every node; the answers come back to the asking
// node's own topic and are matched to a bounded table of pending requests by id.
//
// A call to a client is made only once its asker knows it waits for the answer: the node with the
// session says `calling` and holds the call until the asker says `go` (it still waits) or `drop`
// (it already told its caller that no node has the session, the window for saying so being
// over). Without that, a node hearing the request late would call a client whose answer reaches
// no one, the caller having been told -32602. A request without `confirm` (from a node that does
// not send `go`) is called at once, as it asks.
import { nanoid } from 'nanoid';
import type { Logger } from '../peer/logger.js';
import { KeyedShares } from '../upstream/keyed-shares.js';
import { ErrorCode } from '../protocol/error-codes.js';
import {
  InvalidParamsError,
  JsonRpcError,
  ServerError,
  isErrorObject,
} from '../protocol/errors.js';
import {
  ConnectionClosedError,
  TimeoutError,
  TooManyPendingCallsError,
} from '../protocol/local-errors.js';
import type { ErrorObject, Params } from '../protocol/types.js';
import type { Gateway } from '../server/gateway.js';
import type { Session } from '../server/session.js';
import type { NodeChannel } from '../server/session-router.js';

/** One client's answer to a call: its result, or its error as it sent it (or ours, see below). */
export type ClientAnswer =
  { sessionId: string; result: unknown } | { sessionId: string; error: ErrorObject };

/** What travels on the node channel. */
type Wire =
  | {
      t: 'call';
      id: string;
      from: string;
      session?: string;
      user?: string;
      method: string;
      params?: Params;
      timeoutMs: number;
      /** Hold the call until `go` (see the top of this file). */
      confirm?: true;
    }
  /**
   * A node that has the session, or sessions of the user: which ones. With `from`, it holds the
   * call for `go` or `drop` to that node; without, it called them already. Their answers follow.
   */
  | { t: 'calling'; id: string; sessions: string[]; from?: string }
  /** The asker of a held call still waits for its answers: call the clients now. */
  | { t: 'go'; id: string; from: string }
  /** The asker of a held call no longer waits (its window passed): do not call them. */
  | { t: 'drop'; id: string; from: string }
  | { t: 'answer'; id: string; answer: ClientAnswer }
  | { t: 'count'; id: string; from: string; topic: string }
  | { t: 'counted'; id: string; count: number };

interface PendingCall {
  kind: 'session';
  settle(answer: ClientAnswer): void;
  /**
   * The session's node said it has the session (`calling`): its answer is awaited, and a node
   * that holds the call (`holder`) is told to make it.
   */
  acknowledged(holder: string | undefined): void;
}

/** A call this node holds for its asker's `go` (see the top of this file). */
interface HeldCall {
  readonly call: Extract<Wire, { t: 'call' }>;
  readonly sessions: Session<unknown>[];
  readonly timeoutMs: number;
  /** Ends the hold of an asker that never said (its `go` or `drop` lost): the call is not made. */
  readonly expiry: ReturnType<typeof setTimeout>;
}

interface PendingUserCall {
  kind: 'user';
  /** Sessions announced, and their answers once they come. */
  answers: Map<string, ClientAnswer | undefined>;
  /** The JSON characters of the answers kept (at most MAX_USER_ANSWERS_CHARS). */
  chars: number;
  /** The window for nodes to announce their sessions has passed. */
  windowClosed: boolean;
  done(): void;
}

interface PendingCount {
  kind: 'count';
  count: number;
  nodes: number;
}

/** A pending request, and whose share of the table it takes (`callerKey`). */
type Pending = (PendingCall | PendingUserCall | PendingCount) & { readonly caller: string };

export interface NodeRequestsOptions {
  /** Requests awaiting answers at once; beyond it a request is refused with -32000. */
  maxPending: number;
  /** Of those, one caller's (`callerKey`); beyond it that caller's are refused with -32000. */
  maxPendingPerCaller: number;
  /** How long to wait for other nodes to announce (a user's sessions, a topic's count), in ms. */
  windowMs: number;
  logger: Logger;
}

/**
 * The most JSON characters the answers of one callClient by user hold together: a user may have
 * maxConnectionsPerUser sessions on each node, each answering up to maxMessageBytes, and the
 * reply holds them all. An answer that would pass it is replaced by answersTooLarge.
 */
export const MAX_USER_ANSWERS_CHARS = 4 * 1_048_576;

function answersTooLarge(sessionId: string): ErrorObject {
  return {
    code: ErrorCode.ServerBusy,
    message: "The answers of the user's sessions are over the reply's bound",
    data: { sessionId, reason: 'answers too large', limit: MAX_USER_ANSWERS_CHARS },
  };
}

/** `answer` as a user call keeps it: whole while the answers fit the bound, else its refusal. */
function keptAnswer(entry: PendingUserCall, answer: ClientAnswer): ClientAnswer {
  const chars = JSON.stringify('result' in answer ? answer.result : answer.error)?.length ?? 0;
  if (entry.chars + chars > MAX_USER_ANSWERS_CHARS) {
    return { sessionId: answer.sessionId, error: answersTooLarge(answer.sessionId) };
  }
  entry.chars += chars;
  return answer;
}

/** The -32012 a call gets when its client did not answer in time. */
function timedOut(sessionId: string, timeoutMs: number): ErrorObject {
  return {
    code: ErrorCode.UpstreamTimeout,
    message: 'The client did not answer in time',
    data: { sessionId, reason: `no answer within ${timeoutMs} ms` },
  };
}

/** Call one local session; never rejects: every outcome is a ClientAnswer. */
export async function callSession(
  session: Session<unknown>,
  method: string,
  params: Params | undefined,
  timeoutMs: number,
): Promise<ClientAnswer> {
  const sessionId = session.id;
  try {
    return { sessionId, result: await session.call(method, params, { timeoutMs }) };
  } catch (err) {
    if (err instanceof JsonRpcError) return { sessionId, error: err.toErrorObject() };
    if (err instanceof TimeoutError) return { sessionId, error: timedOut(sessionId, timeoutMs) };
    // The session's own table of calls to its client (limits.maxPendingCalls) is full: the
    // client is slow, not gone, so the caller may try again, as with the API's own -32000.
    if (err instanceof TooManyPendingCallsError) {
      return {
        sessionId,
        error: {
          code: ErrorCode.ServerBusy,
          message: 'Too many calls to the client in progress',
          data: { sessionId, reason: 'too many pending calls', limit: err.limit },
        },
      };
    }
    const closed = err instanceof ConnectionClosedError;
    return {
      sessionId,
      error: {
        code: ErrorCode.UpstreamUnavailable,
        message: closed
          ? 'The client disconnected before it answered'
          : 'The call to the client failed',
        data: { sessionId, reason: closed ? 'session closed' : 'call failed' },
      },
    };
  }
}

/** The node a session id names (`<nodeId>-<random>`). */
export function nodeOf(sessionId: string): string | undefined {
  const dash = sessionId.lastIndexOf('-');
  return dash > 0 ? sessionId.slice(0, dash) : undefined;
}

/** The -32011 a call gets when it reaches a node whose server API is closing. */
function apiClosed(sessionId: string): ErrorObject {
  return {
    code: ErrorCode.UpstreamUnavailable,
    message: "The client's node is closing its server API",
    data: { sessionId, reason: 'server API closed' },
  };
}

/**
 * A gateway's node channel and who receives on it. It stays open once opened, for as long as
 * the gateway's router receives: a server API that closed goes on receiving, to refuse the
 * calls still sent to its node at once (its sessions stay until the gateway's drain), and one
 * started again on the same gateway takes the channel over.
 */
interface SharedChannel {
  receiver: NodeRequests;
  readonly opened: Promise<NodeChannel>;
}

const channels = new WeakMap<object, SharedChannel>();

export class NodeRequests {
  private readonly pending = new Map<string, Pending>();
  /** Calls of other nodes (and this one's by user) held for their asker's `go`, by request id. */
  private readonly held = new Map<string, HeldCall>();
  /** Requests pending per caller; an entry only while the caller has one. */
  private readonly byCaller: KeyedShares;
  private channel: NodeChannel | undefined;
  /** close() was called: calls from other nodes are refused, those in progress finish. */
  private closing = false;

  constructor(
    private readonly gateway: Gateway<any>, // eslint-disable-line @typescript-eslint/no-explicit-any -- any application context
    private readonly options: NodeRequestsOptions,
  ) {
    this.byCaller = new KeyedShares(options.maxPendingPerCaller);
  }

  /**
   * Listen on the gateway's node channel (opened once per gateway, see SharedChannel): for
   * requests from other nodes, and answers to ours.
   */
  async start(): Promise<void> {
    let shared = channels.get(this.gateway);
    if (!shared) {
      const receiving: { receiver: NodeRequests } = { receiver: this };
      const opened = this.gateway.openNodeChannel((body) =>
        receiving.receiver.receive(body as Wire),
      );
      const created: SharedChannel = Object.assign(receiving, { opened });
      channels.set(this.gateway, created);
      // A channel that did not open is opened again by the next start.
      opened.catch(() => {
        if (channels.get(this.gateway) === created) channels.delete(this.gateway);
      });
      shared = created;
    }
    shared.receiver = this;
    this.channel = await shared.opened;
  }

  /**
   * Stop: this node's own requests still waiting end now, and calls other nodes make to this
   * node's clients are refused with -32011 at once, from now until the gateway stops receiving
   * or a server API started again takes the channel over. Calls already in progress to them are
   * let finish: the client's answer, or the -32011 of a session the gateway's drain closes, is
   * sent back (resolving does not wait for them: the drain that ends them comes after).
   */
  close(): Promise<void> {
    this.closing = true;
    // A held call was not made: its asker hears -32011 now, as a call arriving now would.
    for (const id of [...this.held.keys()]) this.refuseHeld(id);
    // Whatever still waits ends now (their timers are unref'd and cleared as they settle).
    for (const [id, pending] of this.pending) {
      this.release(id);
      if (pending.kind === 'user') pending.done();
    }
    return Promise.resolve();
  }

  /** Call a local session for another node and send the answer back. */
  private serve(session: Session<unknown>, call: Extract<Wire, { t: 'call' }>, timeoutMs: number) {
    void callSession(session, call.method, call.params, timeoutMs).then((result) =>
      this.answerBack(call, result),
    );
  }

  /** A reply to another node's request: sent after close() too (a refusal, an answer in progress). */
  private answerBack(call: Extract<Wire, { t: 'call' }>, answer: ClientAnswer): Promise<void> {
    return this.sendOn(call.from, { t: 'answer', id: call.id, answer }).catch((err: unknown) =>
      this.options.logger.warn(
        { err, node: call.from },
        'server API: could not answer another node',
      ),
    );
  }

  /**
   * Call a client by session id, wherever it is connected. Resolves with its answer (result or
   * error); rejects with -32602 when no node has the session, -32000 when the table is full,
   * -32009 when the broker did not take the request.
   */
  async callSession(
    sessionId: string,
    method: string,
    params: Params | undefined,
    timeoutMs: number,
    caller: string,
  ): Promise<ClientAnswer> {
    const local = this.gateway.sessions.get(sessionId);
    if (local) return callSession(local, method, params, timeoutMs);
    const node = nodeOf(sessionId);
    if (node === undefined || node === this.gateway.nodeId) throw noSuchSession();
    const id = this.reserve(caller);
    return new Promise<ClientAnswer>((resolve, reject) => {
      const timer = setTimeout(
        () => settle({ sessionId, error: timedOut(sessionId, timeoutMs) }),
        timeoutMs,
      );
      timer.unref();
      // A node that has the session says so at once: none within the window, no node has it
      // (an id naming no node, or one that is gone), rather than a slot held for timeoutMs.
      const unheard = setTimeout(
        () => settle({ sessionId, error: noSuchSession().toErrorObject() }),
        Math.min(this.options.windowMs, timeoutMs),
      );
      unheard.unref();
      const settle = (answer: ClientAnswer): void => {
        clearTimeout(timer);
        clearTimeout(unheard);
        this.release(id);
        resolve(answer);
      };
      const acknowledged = (holder: string | undefined): void => {
        clearTimeout(unheard);
        if (holder === undefined) return;
        // Not sent, the call is not made: the caller hears why, as when the request was not.
        this.send(holder, { t: 'go', id, from: this.gateway.nodeId }).catch((err: unknown) => {
          clearTimeout(timer);
          this.release(id);
          reject(err as Error);
        });
      };
      this.pending.set(id, { kind: 'session', settle, acknowledged, caller });
      this.send(node, {
        t: 'call',
        id,
        from: this.gateway.nodeId,
        session: sessionId,
        method,
        params,
        timeoutMs,
        confirm: true,
      }).catch((err: unknown) => {
        clearTimeout(timer);
        this.release(id);
        reject(err as Error);
      });
    });
  }

  /**
   * Call every session of `user` on every node. Nodes announce their sessions of the user
   * within `windowMs`; the answers of those sessions are awaited up to `timeoutMs` (a session
   * that did not answer by then gets -32012). Empty when no node announced a session.
   */
  async callUser(
    user: string,
    method: string,
    params: Params | undefined,
    timeoutMs: number,
    caller: string,
  ): Promise<ClientAnswer[]> {
    const id = this.reserve(caller);
    const answers = new Map<string, ClientAnswer | undefined>();
    return new Promise<ClientAnswer[]>((resolve, reject) => {
      let ended = false;
      const end = (): void => {
        if (ended) return;
        ended = true;
        clearTimeout(windowTimer);
        clearTimeout(deadline);
        this.release(id);
        resolve(
          [...answers].map(
            ([sessionId, answer]) => answer ?? { sessionId, error: timedOut(sessionId, timeoutMs) },
          ),
        );
      };
      const entry: PendingUserCall & Pending = {
        kind: 'user',
        caller,
        answers,
        chars: 0,
        windowClosed: false,
        done: () => {
          if (entry.windowClosed && [...answers.values()].every((a) => a !== undefined)) end();
        },
      };
      const windowTimer = setTimeout(
        () => {
          entry.windowClosed = true;
          entry.done();
        },
        Math.min(this.options.windowMs, timeoutMs),
      );
      const deadline = setTimeout(end, timeoutMs);
      windowTimer.unref();
      deadline.unref();
      this.pending.set(id, entry);
      this.send(undefined, {
        t: 'call',
        id,
        from: this.gateway.nodeId,
        user,
        method,
        params,
        timeoutMs,
        confirm: true,
      }).catch((err: unknown) => {
        ended = true;
        clearTimeout(windowTimer);
        clearTimeout(deadline);
        this.release(id);
        reject(err as Error);
      });
    });
  }

  /**
   * Subscribers of `topic` on every node that answers within `windowMs` (this one always
   * does, through the broker like the others): the sum, and how many nodes answered.
   */
  async countSubscribers(topic: string, caller: string): Promise<{ count: number; nodes: number }> {
    const id = this.reserve(caller);
    const entry: PendingCount & Pending = { kind: 'count', count: 0, nodes: 0, caller };
    this.pending.set(id, entry);
    try {
      await this.send(undefined, { t: 'count', id, from: this.gateway.nodeId, topic });
      await new Promise((resolve) => setTimeout(resolve, this.options.windowMs).unref());
      return { count: entry.count, nodes: entry.nodes };
    } finally {
      this.release(id);
    }
  }

  /**
   * A fresh request id, counted under `caller` from now on: its entry, set at once, names the
   * caller, and `release` gives the share back. -32000 when the table of pending requests is
   * full, or the caller's share of it.
   */
  private reserve(caller: string): string {
    if (this.pending.size >= this.options.maxPending) {
      throw new ServerError(ErrorCode.ServerBusy, 'Too many calls to clients in progress', {
        maxPendingCalls: this.options.maxPending,
      });
    }
    if (!this.byCaller.take(caller)) {
      throw new ServerError(
        ErrorCode.ServerBusy,
        'Too many calls to clients in progress for this caller',
        { maxPendingCallsPerCaller: this.byCaller.max },
      );
    }
    return nanoid(12);
  }

  /** The request `id` is over: out of the table, and its caller's share given back (once). */
  private release(id: string): void {
    const entry = this.pending.get(id);
    if (entry === undefined) return;
    this.pending.delete(id);
    this.byCaller.give(entry.caller);
  }

  /** A request of this node's own: refused once close() was called. */
  private async send(node: string | undefined, body: Wire): Promise<void> {
    if (this.closing) throw new ServerError(ErrorCode.ShuttingDown, 'The server API is closed');
    await this.sendOn(node, body);
  }

  private async sendOn(node: string | undefined, body: Wire): Promise<void> {
    if (!this.channel) throw new ServerError(ErrorCode.ShuttingDown, 'The server API is closed');
    await this.channel.send(node, body);
  }

  private reply(node: string, body: Wire): void {
    this.sendOn(node, body).catch((err: unknown) =>
      this.options.logger.warn({ err, node }, 'server API: could not answer another node'),
    );
  }

  private receive(body: Wire): void {
    if (typeof body !== 'object' || body === null || typeof body.id !== 'string') return;
    switch (body.t) {
      case 'call':
        return this.answerCall(body);
      case 'count': {
        const count = this.gateway.pubsub.topics()[body.topic] ?? 0;
        return this.reply(body.from, { t: 'counted', id: body.id, count });
      }
      case 'counted': {
        const entry = this.pending.get(body.id);
        if (entry?.kind !== 'count') return;
        entry.count += typeof body.count === 'number' ? body.count : 0;
        entry.nodes++;
        return;
      }
      case 'calling':
        return this.heardCalling(body);
      case 'go':
      case 'drop': {
        // Only its asker ends a hold; once closing, none is left (close refused them).
        if (this.held.get(body.id)?.call.from !== body.from) return;
        const held = this.takeHeld(body.id)!;
        if (body.t === 'go') {
          for (const session of held.sessions) this.serve(session, held.call, held.timeoutMs);
        }
        return;
      }
      case 'answer': {
        const entry = this.pending.get(body.id);
        const answer = body.answer;
        // What another node sent is checked as far as reading it needs: a broken message is dropped.
        if (!isClientAnswer(answer)) return;
        if (entry?.kind === 'session') entry.settle(answer);
        else if (entry?.kind === 'user') {
          // A session answers once: another answer naming it is not counted again.
          if (entry.answers.get(answer.sessionId) !== undefined) return;
          entry.answers.set(answer.sessionId, keptAnswer(entry, answer));
          entry.done();
        }
        return;
      }
    }
  }

  /**
   * A node says it has the session, or sessions of the user, of one of this node's requests.
   * A request still waiting takes them and, from a node that holds the call, lets it be made
   * (`go`); one over (its window passed, or ended) tells that node not to make it (`drop`).
   */
  private heardCalling(body: Extract<Wire, { t: 'calling' }>): void {
    const entry = this.pending.get(body.id);
    const holder = typeof body.from === 'string' ? body.from : undefined;
    if (entry?.kind === 'session') return entry.acknowledged(holder);
    if (entry?.kind === 'user' && !entry.windowClosed && Array.isArray(body.sessions)) {
      for (const sessionId of body.sessions) {
        if (typeof sessionId === 'string' && !entry.answers.has(sessionId)) {
          entry.answers.set(sessionId, undefined);
        }
      }
      if (holder !== undefined) this.goOrFail(holder, body.id, entry, body.sessions);
      return;
    }
    if (holder !== undefined)
      this.reply(holder, { t: 'drop', id: body.id, from: this.gateway.nodeId });
  }

  /**
   * Let a node make a user call it holds; not sent, its sessions are answered with why (the
   * call is not made, and the request goes on for the other nodes' sessions).
   */
  private goOrFail(holder: string, id: string, entry: PendingUserCall, sessions: string[]): void {
    this.send(holder, { t: 'go', id, from: this.gateway.nodeId }).catch((err: unknown) => {
      for (const sessionId of sessions) {
        if (typeof sessionId !== 'string' || entry.answers.get(sessionId) !== undefined) continue;
        entry.answers.set(sessionId, {
          sessionId,
          error:
            err instanceof JsonRpcError
              ? err.toErrorObject()
              : { code: ErrorCode.InternalError, message: (err as Error).message },
        });
      }
      entry.done();
    });
  }

  /**
   * Hold a call for its asker's `go`, having told it which sessions (`calling`); past this
   * node's bound of held calls (maxPending), refused with -32000 instead. A hold its asker
   * never ends (a `go` or `drop` lost) ends with the call's timeout, the call not made.
   */
  private hold(
    call: Extract<Wire, { t: 'call' }>,
    sessions: Session<unknown>[],
    timeoutMs: number,
  ) {
    // The same request heard twice is held once.
    if (this.held.has(call.id)) return;
    if (this.held.size >= this.options.maxPending) {
      for (const session of sessions)
        void this.answerBack(call, heldTooMany(session.id, this.options.maxPending));
      return;
    }
    const expiry = setTimeout(() => this.held.delete(call.id), timeoutMs);
    expiry.unref();
    this.held.set(call.id, { call, sessions, timeoutMs, expiry });
    this.reply(call.from, {
      t: 'calling',
      id: call.id,
      sessions: sessions.map((s) => s.id),
      from: this.gateway.nodeId,
    });
  }

  /** A held call, out of the table and its expiry cleared. */
  private takeHeld(id: string): HeldCall | undefined {
    const held = this.held.get(id);
    if (!held) return undefined;
    this.held.delete(id);
    clearTimeout(held.expiry);
    return held;
  }

  /** A held call not to be made (the server API closes): -32011 to its asker for each session. */
  private refuseHeld(id: string): void {
    const held = this.takeHeld(id);
    for (const session of held?.sessions ?? []) {
      void this.answerBack(held!.call, { sessionId: session.id, error: apiClosed(session.id) });
    }
  }

  /** A call from another node (or this one, for a user's sessions): made here, answered back. */
  private answerCall(call: Extract<Wire, { t: 'call' }>): void {
    const timeoutMs = Math.max(1, Math.min(call.timeoutMs, 2 ** 31 - 1));
    if (typeof call.session === 'string') {
      const session = this.gateway.sessions.get(call.session);
      if (!session) {
        void this.answerBack(call, {
          sessionId: call.session,
          error: noSuchSession().toErrorObject(),
        });
      } else if (this.closing) {
        void this.answerBack(call, { sessionId: call.session, error: apiClosed(call.session) });
      } else if (call.confirm === true) {
        this.hold(call, [session], timeoutMs);
      } else {
        this.reply(call.from, { t: 'calling', id: call.id, sessions: [call.session] });
        this.serve(session, call, timeoutMs);
      }
      return;
    }
    // A closing node announces no session of the user: the asking node does not wait for it.
    if (typeof call.user !== 'string' || this.closing) return;
    const sessions = [...this.gateway.sessions.values()].filter(
      (session) => session.user === call.user && session.transport.canPush,
    );
    if (sessions.length === 0) return;
    if (call.confirm === true) return this.hold(call, sessions, timeoutMs);
    // Announced before any answer, so the asking node waits for each of them.
    this.reply(call.from, { t: 'calling', id: call.id, sessions: sessions.map((s) => s.id) });
    for (const session of sessions) this.serve(session, call, timeoutMs);
  }
}

/** The -32000 a call gets when its client's node holds maxPending calls for their askers' `go`. */
function heldTooMany(sessionId: string, limit: number): ClientAnswer {
  return {
    sessionId,
    error: {
      code: ErrorCode.ServerBusy,
      message: "Too many calls to clients in progress on the client's node",
      data: { sessionId, reason: 'too many pending calls', limit },
    },
  };
}

function noSuchSession(): InvalidParamsError {
  return new InvalidParamsError('No session with this id is connected', {
    field: 'sessionId',
    reason: 'no such session',
  });
}

/** What a node's answer must be to be read: a session id, and a result or an error object. */
function isClientAnswer(value: unknown): value is ClientAnswer {
  if (typeof value !== 'object' || value === null) return false;
  const answer = value as Record<string, unknown>;
  if (typeof answer['sessionId'] !== 'string') return false;
  return 'error' in answer ? isErrorObject(answer['error']) : 'result' in answer;
}
