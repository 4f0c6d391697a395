// The worker's side: one RpcClient, and the tabs connected to it over MessagePorts. Each tab's
// calls, notifications and subscriptions go through the one client, so the server sees one
// session, and subscriptions to one topic with the same params share one wire subscription
// (the client's own sharing counts the tabs' observers). A server-to-client call goes to the
// first live tab that registered the method, and on to the next one if that tab goes away
// before it answers. A tab that says bye, whose port closes, or that misses two heartbeats is
// let go: its subscriptions, calls and handlers with it. When the last tab has gone the client
// closes; the next tab to say hello starts a new one. What one tab can make the worker hold is
// bounded (its streams, calls, handlers and the server's calls it has running): one tab gone
// wrong cannot take the worker every tab of the origin shares.
import type { Observable, Subscription } from 'rxjs';
import type { HandlerContext } from '../../peer/handler-context.js';
import { MAX_TIMER_MS } from '../../peer/pending-calls.js';
import type { BatchEntry } from '../../peer/peer-core.js';
import { Hub } from '../../peer/hub.js';
import { checkOptions, isRecord, numberIn, refuse } from '../../peer/option-rules.js';
import type { Rule } from '../../peer/option-rules.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { InternalError, MethodNotFoundError, ServerError } from '../../protocol/errors.js';
import {
  ConnectionClosedError,
  NotConnectedError,
  TimeoutError,
  TooManyPendingCallsError,
} from '../../protocol/local-errors.js';
import { ReservedMethod } from '../../protocol/reserved.js';
import type { Params, RequestId } from '../../protocol/types.js';
import type { DisconnectEvent } from '../authentication.js';
import { CLIENT_MAX_IN_FLIGHT, createClient, queuedIn, stoppedWith } from '../client.js';
import type { RpcClient } from '../client.js';
import { clientDefaults, clientOptionRules } from '../client-options.js';
import type { ClientOptions } from '../client-options.js';
import { subscriptionStatus$ } from '../subscription-status.js';
import { SharedRun } from '../wanted.js';
import { INBOX_SUBSCRIPTION } from '../inbox.js';
import type { SubscriptionEvent } from '../subscriptions.js';
import { otherVersionError, readSent, SHARED_PROTOCOL_VERSION } from './messages.js';
import type {
  HostMessage,
  SentBatchEntry,
  TabMessage,
  WireDisconnect,
  WireSettled,
} from './messages.js';
import { sharedOnlyRules } from './options.js';
import type { ForwardedOptions } from './options.js';
import { fromWire, toWire } from './wire-errors.js';
import type { WireError } from './wire-errors.js';

/** createClient's options, fixed in the worker script, and how often tabs are pinged. */
export interface ClientHostOptions extends Partial<ClientOptions> {
  /** Ping each tab this often (ms); two pings unanswered and the tab is let go. Default 5 000. */
  tabHeartbeatMs?: number;
  /**
   * Most streams one tab has open at once (subscriptions, status observers, `joined$`,
   * `inboxGaps$`): one more ends at once with a -32005 error. Default 1 000.
   */
  maxStreamsPerTab?: number;
  /**
   * Most calls one tab has in flight at once (`call`, `history`, `authenticate` one each, a
   * `batch` one per request in it): one more rejects with TooManyPendingCallsError, and a batch
   * that does not fit rejects whole, nothing of it sent. Default half the client's
   * `maxPendingCalls` (512), so one tab cannot take every slot of the connection.
   */
  maxCallsPerTab?: number;
  /**
   * Most methods one tab has handlers registered for: one more is not registered, and the tab
   * logs why (its `logger`). Default 1 000.
   */
  maxHandlersPerTab?: number;
  /**
   * Most calls and notifications one tab has waiting in the client's offline queue while it is
   * not connected: one more call rejects with NotConnectedError, one more notification is
   * dropped and logged. Default half the client's `maxQueued` (50), so one tab cannot fill the
   * queue every tab shares.
   */
  maxQueuedPerTab?: number;
  /**
   * Most of the server's calls one tab has running at once (its handlers' and its getToken's):
   * one more goes to the next tab that has the method, or is answered -32000 Server busy when
   * every such tab is full. Default 128, half the 256 the client runs at once, so one tab that
   * never answers cannot leave the server's calls to other tabs busy.
   */
  maxRunsPerTab?: number;
}

/** The bounds per tab a worker script does not set (maxCallsPerTab's follows the client's). */
const DEFAULT_MAX_STREAMS_PER_TAB = 1_000;
const DEFAULT_MAX_HANDLERS_PER_TAB = 1_000;

const perTab = numberIn(1, Infinity, true);

/**
 * The options shareClient and createClientHost have and createClient has not (docs/options.md
 * lists them). Only the worker script gives the bounds: they guard the worker from its tabs.
 */
export const hostOnlyRules: Readonly<Record<string, Rule>> = {
  tabHeartbeatMs: sharedOnlyRules.tabHeartbeatMs!,
  maxStreamsPerTab: perTab,
  maxCallsPerTab: perTab,
  maxHandlersPerTab: perTab,
  maxQueuedPerTab: perTab,
  maxRunsPerTab: perTab,
};

/** createClientHost's options, checked, with the defaults it can fill in before a tab comes. */
interface ClientHostConfig {
  /** createClient's options fixed in the worker script (over those of the first tab). */
  readonly fixed: Partial<ClientOptions>;
  /** Undefined: the first tab's, or 5 000. */
  readonly tabHeartbeatMs: number | undefined;
  readonly maxStreamsPerTab: number;
  /** Undefined: half the client's `maxPendingCalls` (rounded up), known once it is made. */
  readonly maxCallsPerTab: number | undefined;
  readonly maxHandlersPerTab: number;
  /** Undefined: half the client's `maxQueued` (rounded up, at least 1). */
  readonly maxQueuedPerTab: number | undefined;
  /** Undefined: half the client's in-flight calls, or all of them for a sole tab. */
  readonly maxRunsPerTab: number | undefined;
}

/**
 * Check createClientHost's (and shareClient's) options where the host is made: an unknown one,
 * or a value of the wrong type, is a TypeError naming it; one out of range a RangeError.
 * createClient's options are checked again, in full, when the client is made. Here, not in
 * options.ts, which the tab loads too: a tab has no use for it.
 */
function resolveClientHostOptions(options: unknown): ClientHostConfig {
  const o = checkOptions(
    options,
    { ...clientOptionRules, ...hostOnlyRules },
    '',
    'createClientHost',
    ['callTimeout'],
  ) as ClientHostOptions;
  const {
    tabHeartbeatMs,
    maxStreamsPerTab,
    maxCallsPerTab,
    maxHandlersPerTab,
    maxQueuedPerTab,
    maxRunsPerTab,
    ...fixed
  } = o;
  return Object.freeze({
    fixed,
    tabHeartbeatMs,
    maxStreamsPerTab: maxStreamsPerTab ?? DEFAULT_MAX_STREAMS_PER_TAB,
    maxCallsPerTab,
    maxHandlersPerTab: maxHandlersPerTab ?? DEFAULT_MAX_HANDLERS_PER_TAB,
    maxQueuedPerTab,
    maxRunsPerTab,
  });
}

/** The worker's side of the shared connection. */
export interface ClientHost {
  /** Serve one tab's port (a SharedWorker's `connect` event gives one per tab). */
  connect(port: MessagePort): void;
  /** How many tabs are connected. */
  readonly tabs: number;
  /** The client holding the connection; undefined while no tab is connected. */
  readonly client: RpcClient | undefined;
  /** Close the connection and let every tab go. */
  close(): Promise<void>;
}

/** A tab's answer to a run: its result or error; undefined when it went away or had no handler. */
type Outcome = { result?: unknown; error?: WireError } | undefined;

/** What a run carries besides its params. */
interface RunContext {
  id: RequestId | undefined;
  traceparent: string | undefined;
  signal: AbortSignal | undefined;
}

const DEFAULT_TAB_HEARTBEAT_MS = 5_000;

/** A tab's call, batch, history or authenticate running through the client. */
interface HostedCall {
  readonly controller: AbortController;
  /** The client's call slots it holds: one, or a batch's requests. */
  readonly slots: number;
}

/** One connected tab: what it has running through the client. */
class HostedTab {
  readonly calls = new Map<number, HostedCall>();
  /** The call slots its calls hold together (maxCallsPerTab bounds it). */
  slots = 0;
  readonly streams = new Map<number, Subscription>();
  readonly runs = new Map<number, (outcome: Outcome) => void>();
  /** The methods it registered handlers for. */
  readonly methods = new Set<string>();
  /**
   * What it has waiting in the client's offline queue: a call's controller until it settles, a
   * token per notification. Emptied when the connection opens, which sends the whole queue.
   */
  readonly queued = new Set<object>();
  /** Pings sent since the tab last posted anything. */
  missed = 0;
  /** Its getToken let the last token asked of it pass its deadline: asked after other tabs. */
  tokenLate = false;
  /** Told 'gone' since it was let go: what it posted before reading that is not answered. */
  toldGone = false;
  /**
   * The params of the last notification it was sent, when that one could not be posted: read
   * by the worker's observer of the user's inbox, which comes next when it was an inbox message.
   */
  unposted: Params | undefined;
  /**
   * It said bye: what it posts after that (its page's own pagehide listeners) is sent, and
   * nothing is posted to it any more.
   */
  left = false;
  /** Told `welcome`: the worker's first message to a tab it took, whatever comes next. */
  #welcomed = false;

  constructor(
    readonly port: MessagePort,
    /** Whether the tab has a getToken to ask. */
    readonly token: boolean,
    /** The worker client's whenDisconnected, told in the welcome. */
    readonly whenDisconnected: () => 'queue' | 'reject',
  ) {}

  /**
   * Post `message` to the tab. Undefined once posted; else the error that tells why it could
   * not be (structured cloning refused it: a value nested deeper than the clone goes, one that
   * a custom worker's middleware made uncloneable), for the caller to pass on in its place.
   */
  post(message: HostMessage): InternalError | undefined {
    // The page has gone (or went into the cache, to say hello again): no one reads it.
    if (this.left) return undefined;
    // Ahead of the state, or of a token run the new client asks for before its state is posted:
    // the tab reads the worker's version in the first message it gets.
    if (!this.#welcomed) {
      this.#welcomed = true;
      const whenDisconnected = this.whenDisconnected();
      const welcome = { t: 'welcome', v: SHARED_PROTOCOL_VERSION, whenDisconnected } as const;
      this.port.postMessage(welcome satisfies HostMessage);
    }
    try {
      this.port.postMessage(message);
      return undefined;
    } catch (err) {
      // A result: the caller still gets an answer.
      if (message.t === 'result')
        this.port.postMessage({ ...message, result: undefined, error: toWire(err) });
      return unposted(err);
    }
  }
}

/** What a message the worker cannot post to a tab is told as: -32603, `data.reason` why. */
function unposted(err: unknown): InternalError {
  const why = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return new InternalError('Internal error', {
    reason: `the shared worker could not post it to the tab (${why})`,
  });
}

class Host implements ClientHost {
  readonly #config: ClientHostConfig;
  /** maxCallsPerTab, or its default from the client's maxPendingCalls once there is a client. */
  #maxCalls = 1;
  /** maxQueuedPerTab, or its default from the client's maxQueued once there is a client. */
  #maxQueued = 1;
  /** maxRunsPerTab, or its default. */
  readonly #maxRuns: number;
  #client: RpcClient | undefined;
  /** The client's whenDisconnected, known before createClient returns (its token run's welcome). */
  #whenDisconnected: 'queue' | 'reject' = clientDefaults.whenDisconnected;
  #watching: Subscription[] = [];
  readonly #tabs = new Set<HostedTab>();
  /** Per method, the tabs that registered it, in order, and how to unregister it. */
  readonly #handlers = new Map<string, { tabs: HostedTab[]; remove: () => void }>();
  #runs = 0;
  /**
   * The token the tabs are being asked for: every token the client wants meanwhile (a dial, the
   * server's rpc.token, authenticate()) waits on it, so a getToken that hangs holds one run.
   * When none of them wants it any more, it is given up (the tab is told `abort`).
   */
  readonly #tokenAsked = new SharedRun<string>();
  #timer: ReturnType<typeof setInterval> | undefined;
  /** The client's joined$, numbered for the tabs: a tab reads one by its number (`jsub`). */
  #joins = new Hub<{ topic: string; jid: number }>();
  readonly #joined = new Map<
    number,
    { source: Observable<SubscriptionEvent<unknown>>; watch: Subscription | undefined }
  >();
  #joinIds = 0;

  constructor(
    options: ClientHostOptions,
    /** It serves one tab only (the fallback): that tab may use every call slot. */
    private readonly soleTab = false,
  ) {
    this.#config = resolveClientHostOptions(options);
    this.#maxRuns =
      this.#config.maxRunsPerTab ??
      (soleTab ? CLIENT_MAX_IN_FLIGHT : Math.ceil(CLIENT_MAX_IN_FLIGHT / 2));
  }

  get tabs(): number {
    return this.#tabs.size;
  }

  get client(): RpcClient | undefined {
    return this.#client;
  }

  connect(port: MessagePort): void {
    let tab: HostedTab | undefined;
    /** Refused for its version: what else the tab posts is in words this worker may misread. */
    let refused = false;
    port.onmessage = (event: MessageEvent) => {
      const message = event.data as TabMessage | null;
      // Not a tab's message (a stray postMessage): reading it would throw in the worker.
      if (typeof message !== 'object' || message === null || refused) return;
      if (message.t === 'hello') {
        if (tab) this.#drop(tab);
        tab = undefined;
        const version = (message as { v?: unknown }).v;
        if (version !== SHARED_PROTOCOL_VERSION) {
          refused = true;
          // A `fail` is what a tab of every version reads as "closed, with this error".
          const error = toWire(otherVersionError(version, SHARED_PROTOCOL_VERSION));
          const fail = { t: 'fail', error, v: SHARED_PROTOCOL_VERSION } satisfies HostMessage;
          return port.postMessage(fail);
        }
        tab = this.#admit(port, message);
      } else if (tab && this.#tabs.has(tab)) {
        tab.missed = 0;
        this.#receive(tab, message);
      } else if (tab?.left && this.#client && sentAfterBye.has(message.t)) {
        // The page's own pagehide listeners run after the tab's, which said bye: a last
        // notification or "save" call goes out as a client of its own would send it. Answers
        // are dropped (no one reads them), and the tab's bounds on calls and the queue hold.
        this.#receive(tab, message);
      } else if (message.t !== 'bye' && !tab?.toldGone) {
        // Once per letting go: the tab says hello again when it reads it. A 'gone' for each of
        // the messages it posted before that (the pongs of a frozen tab waking up) would each
        // make it start over, rejecting the calls it made in between.
        if (tab) tab.toldGone = true;
        port.postMessage({ t: 'gone' } satisfies HostMessage);
      }
    };
    // Where a port tells of its other end closing (Node's do); elsewhere bye and the heartbeat.
    port.addEventListener('close', () => {
      if (tab) this.#drop(tab);
    });
  }

  async close(): Promise<void> {
    await this.#client?.close();
    for (const tab of [...this.#tabs]) this.#drop(tab);
  }

  #admit(port: MessagePort, hello: Extract<TabMessage, { t: 'hello' }>): HostedTab | undefined {
    // The client stopped for good (credentials refused, reconnects exhausted, no reconnecting)
    // while a tab that has not read it yet (frozen, hung) holds it: that tab stays told it
    // closed, and why; this one gets a new client, as the first tab after the last one went does.
    if (this.#client?.state === 'closed') for (const old of [...this.#tabs]) this.#drop(old);
    const tab = new HostedTab(port, hello.token, () => this.#whenDisconnected);
    // In the set first: the new client may ask this tab for a token at once.
    this.#tabs.add(tab);
    if (!this.#client) {
      try {
        this.#start(hello.options, hello.token);
      } catch (err) {
        this.#tabs.delete(tab);
        const fail = { t: 'fail', error: toWire(err), v: SHARED_PROTOCOL_VERSION } as const;
        port.postMessage(fail satisfies HostMessage);
        return undefined;
      }
    }
    tab.post({ t: 'state', state: this.#client!.state });
    return tab;
  }

  #start(fromTab: ForwardedOptions, token: boolean): void {
    const { fixed, tabHeartbeatMs: fixedBeat, maxCallsPerTab, maxQueuedPerTab } = this.#config;
    // The tab checked them, but a port takes anything: createClient checks the rest again.
    if (!isRecord(fromTab)) refuse('options', 'an object', fromTab);
    const { tabHeartbeatMs, ...given } = fromTab;
    if (tabHeartbeatMs !== undefined)
      sharedOnlyRules.tabHeartbeatMs!(tabHeartbeatMs, 'tabHeartbeatMs');
    const options = { ...given, ...fixed } as ClientOptions;
    // The tabs' getToken, asked in whichever tab is there, unless the worker script has one.
    // A tab has the time a dial waits for its providers to give it (createClient checked
    // connectTimeoutMs before it first asks).
    const tokenMs = Math.min(
      options.connectTimeoutMs ?? clientDefaults.connectTimeoutMs,
      MAX_TIMER_MS,
    );
    if (!options.getToken && token) options.getToken = ({ signal }) => this.#token(tokenMs, signal);
    this.#whenDisconnected = options.whenDisconnected ?? clientDefaults.whenDisconnected;
    const client = createClient(options);
    this.#client = client;
    const slots = client.config.maxPendingCalls;
    this.#maxCalls = maxCallsPerTab ?? (this.soleTab ? slots : Math.ceil(slots / 2));
    // At least 1: with maxQueued 0 the client's own queue gives the refusal, naming its bound.
    const queueSlots = client.config.maxQueued;
    this.#maxQueued =
      maxQueuedPerTab ?? Math.max(1, this.soleTab ? queueSlots : Math.ceil(queueSlots / 2));
    const broadcast = (message: HostMessage): void => {
      for (const tab of this.#tabs) tab.post(message);
    };
    const joins = new Hub<{ topic: string; jid: number }>();
    this.#joins = joins;
    this.#watching = [
      client.joined$.subscribe({
        next: ({ topic, subscription }) => {
          const jid = ++this.#joinIds;
          // Kept while the server keeps it: a tab may ask for its messages until it ends.
          const entry = { source: subscription, watch: undefined as Subscription | undefined };
          this.#joined.set(jid, entry);
          const forget = (): boolean => this.#joined.delete(jid);
          const watch = subscription.subscribe({ error: forget, complete: forget });
          if (this.#joined.get(jid) === entry) entry.watch = watch;
          joins.next({ topic, jid });
        },
        complete: () => joins.complete(),
      }),
      client.state$.subscribe((state) => {
        // Open: the client has just sent everything queued (or failed it); nothing waits.
        if (state === 'open') for (const tab of this.#tabs) tab.queued.clear();
        // Closed for good: no dial will want the token being asked for.
        if (state === 'closed') {
          this.#stopAskingForToken();
          // Why it stopped, for the tabs' calls and opened() to reject with as a client's own do.
          const why = stoppedWith(client);
          if (why !== undefined) return broadcast({ t: 'state', state, error: toWire(why) });
        }
        broadcast({ t: 'state', state });
      }),
      client.disconnects$.subscribe((event) =>
        broadcast({ t: 'disconnect', event: wireDisconnect(event) }),
      ),
      client.notifications$.subscribe(({ method, params }) => {
        for (const tab of this.#tabs) {
          const failed = tab.post({ t: 'note', method, params });
          // No gap form for a notification: the tab is told which one it did not get, and why.
          if (failed) tab.post({ t: 'unposted', method, error: toWire(failed) });
          // Params that cannot be cloned are an object: its identity names the message.
          tab.unposted = failed && params;
        }
      }),
    ];
    if (client.config.inbox) {
      // The client hands each message of the user's inbox on as a notification from its own
      // observer of the inbox subscription, the first (made with the client): this one is told
      // of the message after it (a hub tells its observers in the order they came), so a tab
      // whose notification of it was not posted is told of an inbox message lost, for its
      // inboxGaps$. Its end is the client's inbox's, told through inboxGaps$.
      const lost = (event: SubscriptionEvent<unknown>): void => {
        const message = event.data as { params?: unknown } | null | undefined;
        for (const tab of this.#tabs) {
          if (tab.unposted !== undefined && tab.unposted === message?.params)
            tab.post({ t: 'lost' });
          tab.unposted = undefined;
        }
      };
      this.#watching.push(
        client.subscribeWithMeta(INBOX_SUBSCRIPTION).subscribe({ next: lost, error: () => {} }),
      );
    }
    const every = fixedBeat ?? tabHeartbeatMs ?? DEFAULT_TAB_HEARTBEAT_MS;
    this.#timer = setInterval(() => this.#beat(), every);
  }

  #receive(tab: HostedTab, m: TabMessage): void {
    const client = this.#client!;
    switch (m.t) {
      case 'call':
        return this.#answer(tab, m.id, m.timeoutMs, 1, (options) =>
          client.call(m.method, readSent<Params>(m.params), options),
        );
      case 'batch':
        return this.#answer(tab, m.id, m.timeoutMs, requestsIn(m.entries), async (options) =>
          (await client.batch(readEntries(m.entries), options)).map(wireSettled),
        );
      case 'history':
        return this.#answer(tab, m.id, undefined, 1, () => client.history(m.topic, m.options));
      case 'auth':
        return this.#answer(tab, m.id, undefined, 1, () => client.authenticate(m.token));
      case 'cancel':
        return tab.calls.get(m.id)?.controller.abort();
      case 'notify':
        return this.#notify(tab, client, m.method, readSent<Params>(m.params));
      case 'sub':
        return this.#follow(
          tab,
          m.id,
          client.subscribeWithMeta(m.topic, readSent(m.params)),
          (event) => ({ t: 'msg', id: m.id, event }),
          (event) => ({ t: 'msg', id: m.id, event: lostEvent(event) }),
        );
      case 'status':
        return this.#follow(
          tab,
          m.id,
          subscriptionStatus$(client, m.topic, readSent(m.params)),
          (s) => {
            const { error, ...status } = s;
            return {
              t: 'status',
              id: m.id,
              status: error === undefined ? status : { ...status, error: toWire(error) },
            };
          },
        );
      case 'joins':
        return this.#follow(tab, m.id, this.#joins.observable, ({ topic, jid }) => ({
          t: 'join',
          id: m.id,
          topic,
          jid,
        }));
      case 'jsub': {
        const joined = this.#joined.get(m.jid);
        // Ended already (left, or the connection it was on is gone): nothing more will come.
        if (!joined) {
          // An id the tab uses again: the stream it named ends too, rather than outlive its id.
          tab.streams.get(m.id)?.unsubscribe();
          tab.streams.delete(m.id);
          return void tab.post({ t: 'end', id: m.id });
        }
        return this.#follow(
          tab,
          m.id,
          joined.source,
          (event) => ({ t: 'msg', id: m.id, event }),
          (event) => ({ t: 'msg', id: m.id, event: lostEvent(event) }),
        );
      }
      case 'gaps':
        return this.#follow(tab, m.id, client.inboxGaps$, (gap) => ({ t: 'gap', id: m.id, gap }));
      case 'unsub':
        tab.streams.get(m.id)?.unsubscribe();
        tab.streams.delete(m.id);
        return;
      case 'register':
        return this.#register(tab, m.method);
      case 'unregister':
        return this.#unregister(tab, m.method);
      case 'answer': {
        const settle = tab.runs.get(m.id);
        tab.runs.delete(m.id);
        return settle?.(m.missing ? undefined : m);
      }
      case 'bye':
        this.#drop(tab);
        tab.left = true;
        return;
      case 'pong':
        return;
    }
  }

  /**
   * Run one request of the tab's, holding `slots` of the client's call slots, through the
   * client (`signal` cancels it when the tab does, or goes) and post its outcome, unless the
   * tab went first.
   */
  #answer(
    tab: HostedTab,
    id: number,
    timeoutMs: number | undefined,
    slots: number,
    run: (options: { signal: AbortSignal; timeoutMs?: number }) => Promise<unknown>,
  ): void {
    const replaced = tab.calls.get(id);
    // An id the tab uses again: the request it named is given up rather than left running,
    // whether or not this one is taken (else the id would be answered twice). That frees its
    // slots and its place in the queue for this one.
    if (replaced) this.#giveUp(tab, id, replaced);
    if (tab.slots + slots > this.#maxCalls) {
      return void tab.post({
        t: 'result',
        id,
        error: toWire(new TooManyPendingCallsError(this.#maxCalls)),
      });
    }
    if (this.#queues() && tab.queued.size >= this.#maxQueued) {
      return void tab.post({ t: 'result', id, error: toWire(this.#queueFull()) });
    }
    const controller = new AbortController();
    const call: HostedCall = { controller, slots };
    tab.calls.set(id, call);
    tab.slots += slots;
    /** True once, for the request that still holds the id; it then lets go of it. */
    const current = (): boolean => {
      tab.queued.delete(controller);
      if (tab.calls.get(id) !== call) return false;
      tab.calls.delete(id);
      tab.slots -= slots;
      return true;
    };
    const options: { signal: AbortSignal; timeoutMs?: number } = { signal: controller.signal };
    if (timeoutMs !== undefined) options.timeoutMs = timeoutMs;
    const before = queuedIn(this.#client!);
    // The client queues synchronously: it took the call into its queue, or sent or refused it.
    new Promise((resolve) => resolve(run(options))).then(
      (result) => current() && tab.post({ t: 'result', id, result }),
      (err: unknown) => current() && tab.post({ t: 'result', id, error: toWire(err) }),
    );
    if (queuedIn(this.#client!) > before) tab.queued.add(controller);
  }

  /** Let go of a tab's request under `id` and cancel it: nothing of it is posted to the tab. */
  #giveUp(tab: HostedTab, id: number, call: HostedCall): void {
    tab.calls.delete(id);
    tab.slots -= call.slots;
    tab.queued.delete(call.controller);
    call.controller.abort();
  }

  /**
   * Whether a call or notification made now waits in the client's offline queue: not connected,
   * and queueing (the client rejects it at once otherwise, and holds nothing).
   */
  #queues(): boolean {
    const client = this.#client!;
    return client.state !== 'open' && client.config.whenDisconnected === 'queue';
  }

  #queueFull(): NotConnectedError {
    const limit = this.#maxQueued;
    return new NotConnectedError(
      `Not connected and this tab has ${limit} calls and notifications queued (maxQueuedPerTab of the shared worker)`,
    );
  }

  /** A tab's notification: sent, queued within the tab's share of the queue, or dropped. */
  #notify(tab: HostedTab, client: RpcClient, method: string, params: Params | undefined): void {
    const queues = this.#queues();
    if (queues && tab.queued.size >= this.#maxQueued) {
      // As the client does with a notification its own full queue refuses: nobody awaits it.
      client.config.logger.warn({ err: this.#queueFull(), method }, 'queued notification dropped');
      return;
    }
    const before = queuedIn(client);
    try {
      client.notify(method, params);
    } catch (err) {
      // What the tab could not tell before posting it (the client's queue full, params JSON
      // cannot carry): nobody awaits a notification, so it is logged, as above.
      client.config.logger.warn({ err, method }, 'queued notification dropped');
      return;
    }
    // Counted only while disconnected: one queued while connected (behind calls waiting for room
    // in the call table) goes with them, and nothing would take its count back before the next
    // time the client is connected; the client's own maxQueued bounds it meanwhile.
    if (queues && queuedIn(client) > before) tab.queued.add({});
  }

  /**
   * Pass what `source` emits to the tab as `wrap` makes it, until it ends or the tab
   * unsubscribes. A value the tab cannot be posted is posted as `lost` makes it (the gap
   * signal of a subscription's message); without `lost`, the stream ends with the -32603 error
   * that says why.
   */
  #follow<T>(
    tab: HostedTab,
    id: number,
    source: Observable<T>,
    wrap: (value: T) => HostMessage,
    lost?: (value: T) => HostMessage,
  ): void {
    const limit = this.#config.maxStreamsPerTab;
    if (!tab.streams.has(id) && tab.streams.size >= limit) {
      const error = new ServerError(
        ErrorCode.TooManySubscriptions,
        `Too many streams open in this tab: at most ${limit} (maxStreamsPerTab of the shared worker)`,
        { limit },
      );
      return void tab.post({ t: 'end', id, error: toWire(error) });
    }
    // An id the tab uses again: the stream it named would otherwise outlive the tab.
    tab.streams.get(id)?.unsubscribe();
    tab.streams.delete(id);
    let ended = false;
    const subscription = source.subscribe({
      next: (value) => {
        if (ended) return;
        const failed = tab.post(wrap(value));
        if (!failed || (lost && !tab.post(lost(value)))) return;
        ended = true;
        tab.streams.get(id)?.unsubscribe();
        tab.streams.delete(id);
        tab.post({ t: 'end', id, error: toWire(failed) });
      },
      error: (err: unknown) => {
        tab.streams.delete(id);
        tab.post({ t: 'end', id, error: toWire(err) });
      },
      complete: () => {
        tab.streams.delete(id);
        tab.post({ t: 'end', id });
      },
    });
    // Ended while subscribing (a value it could not post, at once): nothing is kept.
    if (ended) subscription.unsubscribe();
    else if (!subscription.closed) tab.streams.set(id, subscription);
  }

  #register(tab: HostedTab, method: string): void {
    if (tab.methods.has(method)) return;
    const limit = this.#config.maxHandlersPerTab;
    if (tab.methods.size >= limit) {
      const error = new RangeError(
        `Too many handlers in this tab: at most ${limit} (maxHandlersPerTab of the shared worker); "${method}" is not registered`,
      );
      return void tab.post({ t: 'refused', method, error: toWire(error) });
    }
    let entry = this.#handlers.get(method);
    if (!entry) {
      let remove: () => void;
      try {
        remove = this.#client!.method(method, (params, ctx: HandlerContext<RpcClient>) =>
          this.#route(method, params as Params | undefined, ctx),
        );
      } catch {
        return; // a reserved name, which the tab refused already, or one the worker script has
      }
      entry = { tabs: [], remove };
      this.#handlers.set(method, entry);
    }
    entry.tabs.push(tab);
    tab.methods.add(method);
  }

  #unregister(tab: HostedTab, method: string): void {
    if (!tab.methods.delete(method)) return;
    const entry = this.#handlers.get(method)!;
    entry.tabs.splice(entry.tabs.indexOf(tab), 1);
    if (entry.tabs.length > 0) return;
    entry.remove();
    this.#handlers.delete(method);
  }

  /**
   * The tabs that can run `method`, first registered first; for a token, the tabs with a
   * getToken, those that let the last one asked of them pass its deadline after the others.
   */
  #servers(method: string): readonly HostedTab[] {
    if (method !== ReservedMethod.Token) return this.#handlers.get(method)?.tabs ?? [];
    const asked = [...this.#tabs].filter((tab) => tab.token);
    return asked.sort((a, b) => Number(a.tokenLate) - Number(b.tokenLate)); // a stable sort
  }

  /**
   * Run a server-to-client call (or notification: `ctx.id` undefined) in the first live tab
   * that has it and room for one more run, and in the next if that one goes away without
   * answering. The call is over when its signal aborts (the server cancelled it or gave up on
   * it, the connection closed), whether or not the tab answers: a tab that never does holds
   * none of the client's in-flight slots beyond the server's wait. With `deadlineMs`, a tab
   * that has not answered within it is given up on (told `abort`) and the next one asked.
   */
  async #route(
    method: string,
    params: Params | undefined,
    ctx: RunContext,
    deadlineMs?: number,
  ): Promise<unknown> {
    const tried = new Set<HostedTab>();
    const notification = ctx.id === undefined && method !== ReservedMethod.Token;
    const signal = ctx.signal;
    let timedOut = false;
    for (;;) {
      signal?.throwIfAborted();
      const untried = this.#servers(method).filter((t) => !tried.has(t));
      if (untried.length === 0) {
        if (timedOut) throw new TimeoutError(method, deadlineMs!);
        throw new MethodNotFoundError(`No open tab has a handler for "${method}"`);
      }
      // A notification holds nothing in the tab: it goes to the first, full or not.
      const tab = notification ? untried[0]! : untried.find((t) => t.runs.size < this.#maxRuns);
      if (!tab) {
        const limit = this.#maxRuns;
        throw new ServerError(
          ErrorCode.ServerBusy,
          `Server busy: every open tab with a handler for "${method}" has ${limit} calls running (maxRunsPerTab of the shared worker)`,
          { limit },
        );
      }
      tried.add(tab);
      const id = ++this.#runs;
      const run: HostMessage = {
        t: 'run',
        id,
        method,
        params,
        rid: ctx.id,
        traceparent: ctx.traceparent,
        notification,
      };
      if (notification) {
        const failed = tab.post(run);
        if (failed) tab.post({ t: 'unposted', method, error: toWire(failed) });
        return;
      }
      const outcome = await new Promise<Outcome>((resolve, reject) => {
        // Over at once, as a cancelled handler is: what the tab answers later is dropped.
        const giveUp = (): void => {
          clearTimeout(late);
          signal?.removeEventListener('abort', abort);
          tab.runs.delete(id);
          tab.post({ t: 'abort', id });
        };
        const abort = (): void => {
          giveUp();
          // A token no longer wanted before this tab gave it (its dial timed out): late too.
          if (deadlineMs !== undefined) tab.tokenLate = true;
          // The peer aborts a handler's signal with an Error (cancelled, or the connection's).
          reject(signal!.reason as Error);
        };
        const late =
          deadlineMs === undefined
            ? undefined
            : setTimeout(() => {
                giveUp();
                timedOut = tab.tokenLate = true;
                resolve(undefined);
              }, deadlineMs);
        tab.runs.set(id, (outcome) => {
          clearTimeout(late);
          signal?.removeEventListener('abort', abort);
          if (outcome && deadlineMs !== undefined) tab.tokenLate = false;
          resolve(outcome);
        });
        const failed = tab.post(run);
        if (failed) {
          // Not run anywhere (no tab can be posted it): answered with why, its slot free.
          clearTimeout(late);
          tab.runs.delete(id);
          return reject(failed);
        }
        signal?.addEventListener('abort', abort, { once: true });
      });
      if (!outcome) continue;
      if (outcome.error) throw fromWire(outcome.error);
      return outcome.result;
    }
  }

  /**
   * A token from a tab's getToken, each tab given `deadlineMs` to answer. Asked of one tab at a
   * time, and once for every caller while it is being asked: a getToken that hangs holds one
   * run, however often the client wants a token meanwhile. A caller whose `signal` aborts is
   * answered at once with its reason; once no caller wants the token, the tab is told `abort`
   * (its getToken's signal aborts) and the next caller asks anew.
   */
  #token(deadlineMs: number, signal: AbortSignal): Promise<string> {
    return this.#tokenAsked.want(
      signal,
      async ({ signal: wanted }) =>
        (await this.#route(
          ReservedMethod.Token,
          undefined,
          { id: undefined, traceparent: undefined, signal: wanted },
          deadlineMs,
        )) as string,
    );
  }

  /** The client has closed: the token being asked for is not wanted; its tab is told. */
  #stopAskingForToken(): void {
    this.#tokenAsked.giveUp(new ConnectionClosedError('Client closed'));
  }

  #beat(): void {
    for (const tab of [...this.#tabs]) {
      if (tab.missed >= 2) {
        this.#drop(tab);
        // If it was only frozen, it says hello again when it reads this.
        tab.toldGone = true;
        tab.post({ t: 'gone' });
      } else {
        tab.missed++;
        tab.post({ t: 'ping' });
      }
    }
  }

  /** Let a tab go: its subscriptions, calls and handlers; the client, when it was the last. */
  #drop(tab: HostedTab): void {
    if (!this.#tabs.delete(tab)) return;
    for (const subscription of tab.streams.values()) subscription.unsubscribe();
    tab.streams.clear();
    for (const call of tab.calls.values()) {
      call.controller.abort(new ConnectionClosedError('The tab closed'));
    }
    tab.calls.clear();
    tab.slots = 0;
    // Its queued notifications still go: only its share of the queue is let go.
    tab.queued.clear();
    for (const method of [...tab.methods]) this.#unregister(tab, method);
    // Its runs go on to the next tab that has the method (it is out of the lists by now).
    const runs = [...tab.runs.values()];
    tab.runs.clear();
    for (const settle of runs) settle(undefined);
    if (this.#tabs.size === 0) this.#stop();
  }

  #stop(): void {
    clearInterval(this.#timer);
    this.#stopAskingForToken();
    for (const watching of this.#watching) watching.unsubscribe();
    this.#watching = [];
    for (const { watch } of this.#joined.values()) watch?.unsubscribe();
    this.#joined.clear();
    const client = this.#client;
    this.#client = undefined;
    void client?.close();
  }
}

/** What a tab that said bye still has sent: what a page's pagehide listener would send. */
const sentAfterBye = new Set<TabMessage['t']>(['call', 'batch', 'notify', 'cancel']);

/**
 * The gap signal a tab gets for a subscription's message it cannot be posted: that message, and
 * the ones the server skipped just before it, lost.
 */
function lostEvent(event: SubscriptionEvent<unknown>): SubscriptionEvent<unknown> {
  return { data: undefined, gap: event.gap === undefined ? (event.missed ?? 0) + 1 : event.gap };
}

/** The client's call slots a batch takes: one per entry that is not a notification. */
function requestsIn(entries: readonly SentBatchEntry[]): number {
  // Not a list: the client refuses it without sending anything; it counts as the one request.
  if (!Array.isArray(entries)) return 1;
  let requests = 0;
  for (const entry of entries) if (!(entry as SentBatchEntry | null)?.notification) requests++;
  return requests;
}

/** A tab's batch entries with their params read (readSent); anything else as it came. */
function readEntries(entries: readonly SentBatchEntry[]): BatchEntry[] {
  // Not a list, or an entry that is no object: the client refuses it without sending anything.
  if (!Array.isArray(entries)) return entries as unknown as BatchEntry[];
  return entries.map((entry: SentBatchEntry | null) =>
    entry !== null && typeof entry === 'object'
      ? { ...entry, params: readSent<Params>(entry.params) }
      : (entry as unknown as BatchEntry),
  );
}

function wireSettled(result: PromiseSettledResult<unknown>): WireSettled {
  return result.status === 'fulfilled'
    ? result
    : { status: 'rejected', reason: toWire(result.reason) };
}

function wireDisconnect(event: DisconnectEvent): WireDisconnect {
  const { error, ...rest } = event;
  return error === undefined ? rest : { ...rest, error: toWire(error) };
}

/** The worker's side of a shared connection, for a SharedWorker script (see shareClient). */
export function createClientHost(options: ClientHostOptions = {}): ClientHost {
  return new Host(options);
}

/**
 * The worker's side run by a tab itself (createSharedClient's fallback): no other tab shares
 * its connection, so its calls are bounded by the client's `maxPendingCalls` alone, as a
 * createClient's are, not by a tab's share of them.
 */
export function createSoleTabHost(): ClientHost {
  return new Host({}, true);
}
