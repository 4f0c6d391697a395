import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex, Readable, Writable } from 'node:stream';
import { nanoid } from 'nanoid';
import type { Observable, Subscription } from 'rxjs';
import type { Logger } from '../peer/logger.js';
import type { MethodDescriptor } from '../peer/method-descriptor.js';
import { MethodRegistry } from '../peer/method-registry.js';
import type { Handler } from '../peer/method-registry.js';
import { peerConfig } from '../peer/peer.js';
import type { PeerConfig } from '../peer/peer.js';
import { ReservedMethod } from '../protocol/reserved.js';
import type { Params } from '../protocol/types.js';
import type { Broker } from '../pubsub/broker.js';
import type { FlowControl } from '../pubsub/delivery.js';
import { MemoryBroker } from '../pubsub/memory-broker.js';
import { OutputBudget, isBudgetMember } from '../transport/output-budget.js';
import { CloseCode } from '../transport/transport.js';
import { Admission, SocketGate } from './admission.js';
import type { SocketCut, SocketLimits } from './admission.js';
import { everyPeerWarnings, sentOverTls, TrustedProxies } from './client-address.js';
import { ConnectionIntake } from './connection-intake.js';
import { SseEndpoint } from './sse-endpoint.js';
import { Heartbeat } from './heartbeat.js';
import {
  checkPathsFree,
  closeServedUpgrades,
  joinServer,
  pathOf,
  ProbeBudget,
  routeFor,
  serveOther,
  serveRoute,
} from './http-dispatch.js';
import type { HttpDispatchDeps, ServerTenant } from './http-dispatch.js';
import { ReadinessConditions } from './http-routes.js';
import type { Readiness, ReadinessCondition } from './http-routes.js';
import { Revocations } from './revocation.js';
import type { RevokeSessionOptions, RevokeUserOptions } from './revocation.js';
import { HttpRpc } from './http-rpc.js';
import { BodyReading, BodyReadings, ReplyWriting } from './body-readings.js';
import { postByteBuckets } from './address-buckets.js';
import { claimsAllow } from './claims-authorization.js';
import { IdentityService, refusingExpired } from './identity.js';
import { GatewayMetrics, countByTransport } from './metrics.js';
import { resolveGatewayOptions } from './gateway-config.js';
import type { GatewayConfig } from './gateway-config.js';
import type { GatewayLimits, GatewayOptions, ResolvedRoutes } from './options.js';
import { PubSubService } from './pubsub-service.js';
import {
  checkStreamDeclaration,
  checkTopicDeclaration,
  definedOptions,
} from './topic-declaration.js';
import { PRESENCE_SUBSCRIPTION, PresenceService } from './presence-service.js';
import type { PresenceHandle } from './presence-service.js';
import type { PublishFromOptions, StreamHandler, TopicOptions } from './pubsub-service.js';
import type { PublishOptions } from './pubsub-types.js';
import type { Session } from './session.js';
import { assertEncodableParams } from './session.js';
import { SessionRouter, namesInbox, subscribeTopicOf } from './session-router.js';
import type { NodeChannel } from './session-router.js';
import { SessionTable } from './session-table.js';
import { Lifecycle } from './lifecycle.js';
import { Membership } from './membership.js';
import type { JoinOptions } from './membership.js';
import type { LifecycleEvent, UserPresenceChange } from './lifecycle-events.js';
import { drainSessions, shutdown } from './shutdown.js';
import { RefusalLog } from './upgrade-rejection.js';
import type { CloseOptions, DrainOptions } from './shutdown.js';

export type { CloseOptions, DrainOptions } from './shutdown.js';

/**
 * The gateway: one HTTP server, `ws` in noServer mode on it, one Session per
 * WebSocket. Handlers are registered once, on the gateway, and serve every session.
 * It wires the parts and holds the public API; connections are admitted by the
 * ConnectionIntake, kept by the SessionTable, and torn down by `shutdown`. On a server it
 * did not create it takes only its own path and routes (`joinServer`), and leaves the rest.
 */
export class Gateway<C = unknown> {
  readonly httpServer: HttpServer;
  readonly logger: Logger;
  readonly registry = new MethodRegistry<Session<C>>();
  /** The options, checked and resolved once (`resolveGatewayOptions`): grouped and frozen. */
  readonly config: GatewayConfig<C>;
  private readonly path: string;
  /** Its HTTP routes (GatewayOptions.routes), resolved. */
  private readonly routes: ResolvedRoutes;
  private readonly limits: Required<GatewayLimits>;
  private readonly heartbeat: Heartbeat<string, Session<C>>;
  /** Bytes queued for all connections together (limits.maxBufferedBytesTotal); none when 0. */
  private readonly outputBudget: OutputBudget<Session<C> | BodyReading> | undefined;
  /** The POST /rpc bodies being read, counted toward outputBudget; none without it. */
  private readonly bodyReadings: BodyReadings | undefined;
  private readonly ownsServer: boolean;
  private readonly ownsBroker: boolean;
  /** Topics, streams and the subscribe/unsubscribe methods. */
  readonly pubsub: PubSubService<C>;
  /** Who is subscribed to the topics declared with `presence`, on every node. */
  private readonly presenceService: PresenceService<C>;
  private closing = false;
  /** What else holds readiness at 503 (`addReadinessCondition`). */
  private readonly readinessConditions = new ReadinessConditions();
  /** This gateway's id among its peers: the prefix of its session ids. */
  readonly nodeId = nanoid(10);
  private readonly router: SessionRouter;
  /** revokeUser, revokeSession, and the deny check around `authenticate`. */
  private readonly revocations: Revocations<C>;
  /** Server-side joins and leaves (session.join, gateway.join), here and on other nodes. */
  private readonly membership: Membership<C>;
  /** Open sessions, by id and by user; connected/disconnected events. */
  private readonly sessionTable: SessionTable<C>;
  /** WebSocket upgrades, TCP and stdio connections: admission up to the open session. */
  private readonly intake: ConnectionIntake<C>;
  private discovery: string | undefined;
  /** Sessions' identity over their connection's life: in-band, refresh, expiry. */
  private readonly identity: IdentityService<C>;
  /** Reserved `rpc.` methods the gateway itself answers (shared by every session's peer). */
  private readonly reservedMethods = new Map<string, Handler<Session<C>>>();
  /** Reserved methods answered with a result serialised beforehand: rpc.discover's document. */
  private readonly reservedResults = new Map<string, string>();
  /** Peer settings every session shares (one object, one set of closures, for all of them). */
  private readonly peerConfig: PeerConfig<Session<C>>;
  private readonly admission: Admission;
  /**
   * The first door of the gateway's own HTTP port and of its TLS TCP listener: sockets bounded
   * per address and in total, headers (and handshakes) timed.
   */
  private readonly socketGate: SocketGate;
  /**
   * The HTTP server's socket bounds: `socketGate` on the gateway's own server; on one it was
   * given, only the bounds the application set in `limits` (none unless it did).
   */
  private readonly serverGate: SocketGate | undefined;
  /** Takes the gateway off a server it was given (listeners, bounds, headersTimeout). */
  private readonly leaveServer: () => void;
  /** `listen()` started the server: `close()` stops it, given or not. */
  private startedServer = false;
  /** Refusals logged without letting a flood of them flood the log. */
  private readonly refusals: RefusalLog;
  /** Proxies whose X-Forwarded-For is believed (GatewayOptions.trustedProxies); none by default. */
  private readonly proxies: TrustedProxies | undefined;
  /** POST /rpc: one ephemeral session per request. */
  private readonly httpRpc: HttpRpc<C>;
  /** The shared peer config, minus the close hook: HTTP exchanges are not connections. */
  private readonly httpPeerConfig: PeerConfig<Session<C>>;
  /** Prometheus metrics, served at /metrics. */
  readonly metrics: GatewayMetrics;
  private closePromise: Promise<void> | undefined;
  private drainPromise: Promise<void> | undefined;
  /** The drain's callers' beforeClose hooks, while its sessions drain (undefined otherwise). */
  private beforeCloses: (() => Promise<void>)[] | undefined;
  /** listen()'s start, settled (never rejects): what the shutdown waits for first. */
  private starting: Promise<unknown> | undefined;

  /** Emits each session once it is open. */
  readonly connected$: Observable<Session<C>>;
  /** Emits each session once it has closed and all its calls have settled. */
  readonly disconnected$: Observable<Session<C>>;
  /**
   * Sessions' lifecycle: connect, disconnect (with the close code and reason), subscribe and
   * unsubscribe (topics, joined ones included). This node's at once; with `clusterEvents`,
   * every node's, each other node's a window (`clusterEvents.flushMs`) later.
   */
  readonly events$: Observable<LifecycleEvent>;
  /** A user's first session opened (on any node, with `clusterEvents`; else on this one). */
  readonly userOnline$: Observable<UserPresenceChange>;
  /** A user's last session closed (on every node, with `clusterEvents`; else on this one). */
  readonly userOffline$: Observable<UserPresenceChange>;
  /** The events above: this node's, and the other nodes' with `clusterEvents`. */
  private readonly lifecycle: Lifecycle;

  constructor(options: GatewayOptions<C> = {}) {
    const config = resolveGatewayOptions<C>(options);
    this.config = config;
    this.logger = config.observability.logger;
    this.path = config.http.path;
    this.routes = config.http.routes;
    this.limits = config.limits;
    // Every path this gateway answers, by the option naming it: another gateway on the same
    // server must not answer them too. Checked before anything is made.
    const paths = new Map<string, string>([[this.path, 'path']]);
    for (const [name, route] of Object.entries(this.routes)) {
      if (route !== false && !paths.has(route)) paths.set(route, `routes.${name}`);
    }
    const { http, auth, pubsub, protocol } = config;
    if (http.server) checkPathsFree(http.server, paths);
    const proxies =
      http.trustedProxies.length > 0 ? new TrustedProxies(http.trustedProxies) : undefined;
    this.proxies = proxies;
    this.admission = new Admission(this.limits, http.allowedOrigins, (request) =>
      sentOverTls(request, proxies),
    );
    for (const warning of everyPeerWarnings(http.trustedProxies)) this.logger.warn({}, warning);
    this.ownsBroker = !pubsub.broker;
    const inbox = pubsub.userInbox;
    this.pubsub = new PubSubService<C>(
      pubsub.broker ?? new MemoryBroker(),
      pubsub.subscriptionMethods,
      this.limits,
      this.logger,
      protocol.exposeErrorDetails,
      inbox && {
        retention: inbox.retention,
        // The router is built on the table (below), so it is reached when a message comes.
        received: (message) => this.router.inboxReceived(message),
      },
    );
    this.pubsub.install(this.registry);
    this.presenceService = new PresenceService<C>(
      this.pubsub.broker,
      this.nodeId,
      this.logger,
      pubsub.presence,
      {
        patternOf: (topic) => this.pubsub.topicPattern(topic),
        mayUse: (session, topic, params, refresh) =>
          this.pubsub.mayUse(session, topic, params, refresh),
        checkName: (topic) => this.pubsub.checkTopicName(topic),
        keptParams: (topic, params) => this.pubsub.keptParamsFor(topic, params),
        mayGoOn: (session, topic, kept) => this.pubsub.mayGoOnKept(session, topic, kept),
        reserve: (session, topic, fresh, kept) =>
          this.pubsub.reserveStreamTopic(session, topic, fresh, kept),
      },
    );
    this.pubsub.onTopicSubscribed = (session, topic) =>
      this.presenceService.subscribed(session, topic);
    this.pubsub.watchedPresenceTopics = () => this.presenceService.watchedTopics;
    this.pubsub.stream(PRESENCE_SUBSCRIPTION, (params, ctx) =>
      this.presenceService.subscription(params, ctx),
    );
    this.sessionTable = new SessionTable<C>({
      nodeId: this.nodeId,
      logger: this.logger,
      limits: this.limits,
      admission: this.admission,
      pubsub: this.pubsub,
      // The router is built on the table (below), so it is reached when a session opens.
      users: {
        userConnected: (user) => this.router.userConnected(user),
        userDisconnected: (user) => this.router.userDisconnected(user),
      },
      inbox: inbox && { holdMs: inbox.holdMs, maxHeld: inbox.retention.maxLength },
      // The heartbeat is made below, before any session opens.
      watch: (id) => this.heartbeat.watch(id),
    });
    this.connected$ = this.sessionTable.connected$;
    this.disconnected$ = this.sessionTable.disconnected$;
    this.membership = new Membership<C>({
      topics: this.pubsub,
      sessions: this.sessionTable.live,
      nodeId: this.nodeId,
      // The router is built below, before any message can come.
      send: (node, body) => this.router.sendMember(node, body),
      logger: this.logger,
    });
    // First, so an application's connected$ observer may already join the session to topics.
    this.connected$.subscribe((session) => {
      session.useMembership(this.membership);
    });
    const lifecycle = new Lifecycle(
      this.pubsub.broker,
      this.nodeId,
      this.logger,
      pubsub.clusterEvents,
    );
    this.lifecycle = lifecycle;
    this.events$ = lifecycle.events$;
    this.userOnline$ = lifecycle.userOnline$;
    this.userOffline$ = lifecycle.userOffline$;
    this.connected$.subscribe((session) => lifecycle.connected(session));
    // Its close code and reason: `closed` has settled by now, so this follows within the turn.
    this.disconnected$.subscribe((session) => {
      void session.closed.then((info) => lifecycle.disconnected(session, info));
    });
    this.pubsub.lifecycle = lifecycle;
    this.router = new SessionRouter(
      this.pubsub.broker,
      this.nodeId,
      this.sessionTable,
      this.logger,
      {
        exposeErrorDetails: protocol.exposeErrorDetails,
        inbox: inbox && {
          retention: inbox.retention,
          hold: (topic) => this.pubsub.holdTopic(topic),
          release: (topic) => this.pubsub.releaseTopic(topic),
        },
        // The revocations are made below, before any message can come.
        revoked: (revocation) => this.revocations.closeLocal(revocation),
        relinked: () => this.revocations.recheck(),
        member: (body) => this.membership.receive(body),
      },
    );
    this.revocations = new Revocations<C>({
      broker: this.pubsub.broker,
      router: this.router,
      nodeId: this.nodeId,
      logger: this.logger,
      exposeErrorDetails: protocol.exposeErrorDetails,
      userOf: auth.userOf,
      issuedAtOf: config.identity.issuedAtOf,
      sessions: () => this.sessionTable.live.values(),
      // The HTTP exchanges are made below, before any revocation can come.
      exchanges: (target) => this.httpRpc.revoke(target),
      exchangeUsers: () => this.httpRpc.users(),
    });
    const live = this.sessionTable.live;
    this.heartbeat = new Heartbeat(
      config.timing.heartbeatIntervalMs,
      live,
      this.limits.maxBufferedBytes,
      (verdict) =>
        this.logger.info(
          verdict === 'missed-pong'
            ? 'terminating a connection that missed its pong'
            : 'closing a connection that does not read what it is sent',
        ),
      // Output held back: its subscriptions' replay backlogs, and what waits for a renewal.
      (session) =>
        (this.pubsub.heldOutputOf(session)?.chars ?? 0) + (session.heldOutput?.chars ?? 0),
    );
    const { maxBufferedBytesTotal } = this.limits;
    this.outputBudget =
      maxBufferedBytesTotal > 0
        ? new OutputBudget<Session<C> | BodyReading>(
            maxBufferedBytesTotal,
            () => chain(live.values(), this.bodyReadings?.values()),
            (entry) =>
              entry instanceof BodyReading
                ? entry
                : isBudgetMember(entry.transport)
                  ? entry.transport
                  : undefined,
            (entry, queued) => {
              if (entry instanceof BodyReading) {
                this.logger.warn(
                  { queued, maxBufferedBytesTotal, remoteAddress: entry.remoteAddress },
                  entry instanceof ReplyWriting
                    ? 'closing a POST whose reply is not read: bytes held on this node are over their budget'
                    : 'refusing a POST body: bytes held on this node are over their budget',
                );
                entry.stop();
                return;
              }
              entry.logger.warn(
                { queued, maxBufferedBytesTotal },
                'closing a connection: output queued on this node is over its budget',
              );
              entry.close(CloseCode.TryAgainLater, 'output over budget');
            },
            // What its subscriptions hold back during replays, and what is held for a renewal
            // of its identity, are the connection's output too.
            (entry) =>
              entry instanceof BodyReading
                ? undefined
                : [this.pubsub.heldOutputOf(entry), entry.heldOutput],
          )
        : undefined;
    this.pubsub.outputBudget = this.outputBudget;
    this.bodyReadings = this.outputBudget && new BodyReadings(this.outputBudget);
    this.metrics = new GatewayMetrics(
      {
        connections: () => countByTransport(live.values()),
        subscriptionsByTopic: () => this.pubsub.topics(),
        // Labelled by declared topic (`room.*`), not by the names clients choose under it.
        subscriptionsByPattern: () => this.pubsub.subscriptionsByPattern(),
        topicsHeld: () => this.pubsub.topicsHeld(),
        closedHoldingSlots: () =>
          this.sessionTable.closedHoldingSlots + this.httpRpc.closedHoldingSlots,
        dropped: () => this.pubsub.stats.dropped,
        slowConsumerDisconnects: () => this.pubsub.stats.slowConsumerDisconnects,
        methodLabel: (method) => this.registry.patternOf(method),
      },
      { cacheMs: this.limits.metricsCacheMs },
    );
    const authorize = auth.authorize;
    const subscribeMethod = this.pubsub.methods.subscribe;
    const appAuthorize = withMethodClaims<C>(
      authorize && ((method, params, session) => authorize({ session, method, params })),
      config.identity.methodsOf,
      // The history method under the name PubSubService registers it by.
      [
        subscribeMethod,
        this.pubsub.methods.unsubscribe,
        this.pubsub.methods.history ?? 'topic.history',
      ],
    );
    // The hook every phase runs: the upgrade, POST, in-band and refresh. An expired identity is
    // refused before the deny check, which would read the broker for it.
    const authenticate = this.revocations.guard(
      refusingExpired(auth.authenticate, config.identity.expiresAtOf, this.logger),
    );
    this.pubsub.topicsOf = config.identity.topicsOf;
    this.identity = new IdentityService<C>({
      config,
      authenticate,
      logger: this.logger,
      authenticated: (session, user) => this.sessionTable.authenticated(session, user),
      holdUser: (user) => this.router.holdUser(user),
      releaseUser: (user) => this.router.userDisconnected(user),
      reauthorize: (session) => this.pubsub.reauthorize(session),
      outputBudget: () => this.outputBudget,
    });
    this.reservedMethods.set(ReservedMethod.Authenticate, this.identity.authenticateCall);
    this.peerConfig = peerConfig({
      registry: this.registry,
      callTimeoutMs: config.timing.callTimeoutMs,
      maxPendingCalls: this.limits.maxPendingCalls,
      maxInFlight: this.limits.maxInFlight,
      exposeErrorDetails: protocol.exposeErrorDetails,
      // With user inboxes, a session's first call also says how it takes its user's messages
      // (SessionInbox): anything but a `$inbox` subscribe takes them plain; the subscribe
      // claims them when its handler takes it.
      authorize: inbox
        ? (method, params, session) => {
            const sessionInbox = session.inbox;
            if (sessionInbox?.undecided && !(method === subscribeMethod && namesInbox(params))) {
              sessionInbox.firstCall();
            }
            return appAuthorize ? appAuthorize(method, params, session) : true;
          }
        : appAuthorize,
      onCallSettled: (method, outcome, ms) => this.metrics.callSettled(method, outcome, ms),
      reservedMethods: this.reservedMethods,
      reservedResults: this.reservedResults,
      // Per call only when sessions can be unauthenticated or expire.
      gate: IdentityService.needed(config) ? this.identity.gate : undefined,
      parse: {
        acceptV1: protocol.acceptV1,
        maxBatch: this.limits.maxBatch,
        maxDepth: this.limits.maxDepth,
        maxJsonValues: this.limits.maxJsonValues,
      },
      onClosed: this.sessionTable.onClosed,
      middleware: config.middleware,
      subscribeMethod: { name: subscribeMethod, topicOf: subscribeTopicOf },
    });
    this.httpPeerConfig = { ...this.peerConfig, onClosed: undefined };
    this.refusals = new RefusalLog(this.logger);
    const socketCut = (reason: SocketCut, remoteAddress: string | undefined): void => {
      this.metrics.httpSocketClosed(reason);
      this.refusals.refused({ reason, remoteAddress }, 'http socket closed');
    };
    this.socketGate = new SocketGate(this.limits, this.proxies, socketCut);
    this.ownsServer = !http.server;
    this.serverGate = this.ownsServer
      ? this.socketGate
      : sharedServerGate(config.limitsSet, this.limits, this.proxies, socketCut);
    const serverGate = this.serverGate;
    this.intake = new ConnectionIntake<C>({
      config,
      path: this.path,
      limits: this.limits,
      logger: this.logger,
      metrics: this.metrics,
      admission: this.admission,
      sockets: {
        handedOver: (socket) => serverGate?.handedOver(socket),
        watchTlsListener: (server) => this.socketGate.watchTlsListener(server),
      },
      refusals: this.refusals,
      proxies: this.proxies,
      broker: this.pubsub.broker,
      router: this.router,
      isClosing: () => this.closing,
      authenticate,
      attach: (transport, context, remoteAddress, user, request, pending) => {
        if (this.outputBudget) transport.joinBudget?.(this.outputBudget);
        const session = this.sessionTable.open(
          transport,
          context,
          remoteAddress,
          user,
          this.peerConfig,
          pending,
        );
        this.identity.opened(session, request, pending);
        return session;
      },
    });
    // Node checks its headers timeout on later keep-alive requests this often (default 30 s).
    const own = { connectionsCheckingInterval: Math.min(1_000, this.limits.headersTimeoutMs) };
    this.httpServer =
      http.server ?? (http.tls ? createHttpsServer({ ...http.tls, ...own }) : createServer(own));
    const server = this.httpServer;
    // The first request's headers are timed by the socket gate; later requests on a keep-alive
    // connection by Node's own headersTimeout, lowered to ours (never raised): on a server the
    // gateway was given, only when the application set limits.headersTimeoutMs.
    const nodeHeadersTimeout = server.headersTimeout;
    const timesHeaders = this.ownsServer || config.limitsSet.includes('headersTimeoutMs');
    const lowered =
      timesHeaders &&
      !(nodeHeadersTimeout > 0 && nodeHeadersTimeout <= this.limits.headersTimeoutMs);
    if (lowered) server.headersTimeout = this.limits.headersTimeoutMs;
    // A whole request (headers and body) within headersTimeoutMs + bodyTimeoutMs, or Node's 408:
    // a body nothing reads (an httpHandler's, say) cannot trickle in for Node's 300 s either.
    const nodeRequestTimeout = server.requestTimeout;
    const requestTimeout = this.limits.headersTimeoutMs + this.limits.bodyTimeoutMs;
    const shortened =
      timesHeaders && !(nodeRequestTimeout > 0 && nodeRequestTimeout <= requestTimeout);
    if (shortened) server.requestTimeout = requestTimeout;
    const unwatch = serverGate?.watch(server);
    // One byte budget per address for every HTTP body (POST /rpc and an event stream's POSTs).
    const postBytes = postByteBuckets(this.limits);
    this.httpRpc = new HttpRpc<C>({
      postBytes,
      bodyReadings: this.bodyReadings,
      admission: this.admission,
      authenticate,
      limits: this.limits,
      logger: this.logger,
      proxies: this.proxies,
      isClosing: () => this.closing,
      bodyTimedOut: (remoteAddress) => {
        this.metrics.httpSocketClosed('body-timeout');
        this.refusals.refused({ reason: 'body-timeout', remoteAddress }, 'http socket closed');
      },
      userOf: auth.userOf,
      refused: (reason, status, remoteAddress) => {
        this.metrics.upgradeRejected(reason);
        // A failed or timed-out hook is logged by runAuthenticate already.
        if (reason === 'auth-error' || reason === 'auth-timeout') return;
        this.refusals.refused(
          { status, reason, transport: 'http', remoteAddress },
          'http request rejected',
        );
      },
      newSession: (context, remoteAddress, transport, admit, user) => {
        const session = this.sessionTable.create(
          transport,
          context,
          remoteAddress,
          admit,
          this.httpPeerConfig,
        );
        // What is keyed on a session's user (an upstream's share per user) sees the exchange's.
        session.user = user;
        return session;
      },
      ended: (session) => this.pubsub.detach(session),
    });
    const dispatch: HttpDispatchDeps<C> = {
      httpHandler: http.httpHandler,
      path: this.path,
      routes: this.routes,
      logger: this.logger,
      metrics: this.metrics,
      httpRpc: this.httpRpc,
      events: new SseEndpoint<C>({
        postBytes,
        intake: this.intake,
        origins: { grantsCors: (origin, req) => this.admission.grantsCors(origin, req) },
        limits: this.limits,
        keepaliveMs: config.timing.heartbeatIntervalMs,
        logger: this.logger,
        counters: this.metrics.countersFor('sse'),
        bodyTimedOut: (remoteAddress) => {
          this.metrics.httpSocketClosed('body-timeout');
          this.refusals.refused({ reason: 'body-timeout', remoteAddress }, 'http socket closed');
        },
        resumeRefused: (reason, remoteAddress) => {
          this.metrics.upgradeRejected(reason);
          this.refusals.refused(
            { reason, transport: 'sse', remoteAddress },
            'event stream resume rejected',
          );
        },
      }),
      readiness: () => this.readiness,
      sessionCount: () => live.size,
      discovery: () => this.discovery,
      probes: new ProbeBudget(
        this.limits,
        (req) => this.proxies?.clientAddress(req) ?? req.socket.remoteAddress,
      ),
    };
    const tenant: ServerTenant = {
      ownsServer: this.ownsServer,
      paths,
      route: (req) => routeFor(dispatch, req),
      serve: (req, res, route) => void serveRoute(dispatch, req, res, route),
      takesUpgrade: (req) => pathOf(req.url) === this.path,
      upgrade: (req, socket, head) => this.intake.upgrade(req, socket, head),
      headersRead: (socket: Duplex, away: boolean) => {
        serverGate?.headersRead(socket);
        // Another listener's upgrade (another WebSocket endpoint's): no HTTP socket any more.
        if (away) serverGate?.handedOver(socket);
      },
      other: (req, res) => serveOther(dispatch, req, res),
      refuseUpgrade: (socket) => this.intake.refusePath(socket),
    };
    const leave = joinServer(server, tenant);
    // On a server the application starts, the gateway starts taking messages for its sessions
    // from other nodes once it listens (gateway.listen() does it itself).
    const started = (): void => {
      this.lifecycle.start();
      // Never rejects: a broker that cannot take the node's subscriptions yet is tried again.
      void this.router.start();
    };
    if (!this.ownsServer) {
      server.on('listening', started);
      if (server.listening) started();
    }
    this.leaveServer = () => {
      leave();
      unwatch?.();
      server.off('listening', started);
      if (lowered && server.headersTimeout === this.limits.headersTimeoutMs) {
        server.headersTimeout = nodeHeadersTimeout;
      }
      if (shortened && server.requestTimeout === requestTimeout) {
        server.requestTimeout = nodeRequestTimeout;
      }
    };
  }

  /**
   * Register a handler for calls from clients. `ctx.session` is the calling Session. A name that
   * is not a non-empty string (or a descriptor of one), a name starting with `rpc.`, a handler
   * that is not a function, and a name already registered are refused here, with a TypeError,
   * a RangeError or an Error naming the method (see MethodRegistry).
   */
  method<P extends Params | undefined, R>(
    descriptor: MethodDescriptor<P, R> | string,
    handler: Handler<Session<C>, P, R>,
  ): () => void {
    return this.registry.method(descriptor, handler);
  }

  /**
   * Declare a topic (exact name, or prefix ending in `*`) that clients may subscribe to. Refused
   * here, before anything is declared: a pattern that is not a string (TypeError), empty or with
   * a `*` anywhere but at its end (RangeError), options that are not an object or an `authorize`
   * that is not a function (TypeError), and a name already declared as a topic or a stream (Error).
   */
  topic(pattern: string, options?: TopicOptions<C>): void {
    this.checkDeclaration(pattern, options, undefined);
    this.checkHighWaterMark(pattern, options?.highWaterMark);
    this.pubsub.topic(pattern, definedOptions(options));
    // Checked above: resolves, or is off.
    const presence = this.presenceService.check(pattern, options?.presence);
    if (presence) this.presenceService.declare(pattern, presence);
  }

  /**
   * Declare a per-subscriber stream: `handler` returns an Observable or an async iterable (an
   * `async function*`) for each subscriber; see StreamHandler. Refused here, before anything is
   * declared: a name that is not a string, a handler that is not a function or a `flow` that is
   * not an object (TypeError), an empty name or one holding `*` (RangeError: a stream has one
   * exact name), and a name already declared as a stream or a topic (Error).
   */
  stream<P, T>(name: string, handler: StreamHandler<C, P, T>, flow?: Partial<FlowControl>): void {
    checkStreamDeclaration(name, handler, flow);
    this.checkHighWaterMark(name, flow?.highWaterMark);
    this.pubsub.stream(name, handler, definedOptions(flow));
  }

  /**
   * Throw as `topic(name, options)` would (or, given `stream`, `stream(name, stream)`), declaring
   * nothing: implementContract checks every subscription of a contract before it registers any
   * of its methods, topics and streams.
   */
  checkDeclaration(
    name: string,
    options: TopicOptions<C> | undefined,
    stream: StreamHandler<C, unknown, unknown> | undefined,
  ): void {
    if (stream) checkStreamDeclaration(name, stream, undefined);
    else {
      checkTopicDeclaration(name, options);
      this.presenceService.check(name, options?.presence);
    }
    this.pubsub.checkDeclarable(name, options, stream !== undefined);
  }

  /**
   * A slow-consumer high-water mark at or above half of `maxBufferedBytes` may never act, and
   * may keep a paused reader paused. Not an error (messages still flow), but worth saying once.
   */
  private checkHighWaterMark(name: string, highWaterMark: number | undefined): void {
    const { maxBufferedBytes } = this.limits;
    if (highWaterMark === undefined || maxBufferedBytes <= 0) return;
    // Reading resumes once the buffer is back at half of maxBufferedBytes; a busy topic keeps
    // it near its high-water mark, so that mark must sit below the half.
    if (highWaterMark < maxBufferedBytes / 2) return;
    this.logger.warn(
      { name, highWaterMark, maxBufferedBytes },
      'highWaterMark is not below half of limits.maxBufferedBytes: a paused reader may not resume, or the slow-consumer policy may never apply',
    );
  }

  /**
   * Publish to every subscriber of `topic` (on every node sharing the broker). Resolves with the
   * sequence number. `except`: session ids (at most 64) that do not get it, on any node; more
   * rejects with a RangeError.
   */
  publish(topic: string, data: unknown, options?: PublishOptions): Promise<number> {
    return this.pubsub.publish(topic, data, options);
  }

  /**
   * Who is subscribed to `topic` (declared with `presence`), on every node: the count, pages
   * of members, and coalesced join/leave events (docs/pubsub.md, Presence).
   */
  presence(topic: string): PresenceHandle {
    return this.presenceService.handle(topic);
  }

  /**
   * Publish every value of an Observable to `topic`; unsubscribe the result to stop. A value
   * that could not be published is logged at warn, or given to `options.onError` with why.
   */
  publishFrom(
    topic: string,
    source: Observable<unknown>,
    options?: PublishFromOptions,
  ): Subscription {
    return this.pubsub.publishFrom(topic, source, options);
  }

  /** The broker topics live on. */
  get broker(): Broker {
    return this.pubsub.broker;
  }

  /**
   * Serve an OpenRPC document at `rpc.discover` and `GET /openrpc.json`
   * (`implementContract` does this with the contract's document). It is serialised here, once:
   * a later change to the object shows once it is given again. Throws JSON.stringify's TypeError
   * for a document it cannot write (a BigInt, a cycle), and the document served before stays.
   */
  serveDiscovery(document: unknown): void {
    this.discovery = JSON.stringify(document);
    // Each call writes this text, not the whole document again. A document JSON.stringify
    // writes as nothing is answered null, as a handler's undefined is.
    this.reservedResults.set(ReservedMethod.Discover, this.discovery ?? 'null');
  }

  /**
   * Notify a session by id, on whichever gateway it is connected (through the broker), at
   * most once: a session is one connection. Session ids are `<nodeId>-<22 random letters and
   * digits>`: not guessable from one another, but not capabilities either (they are logged, and
   * known to whoever the application shows them to); check who may reach a session before
   * calling this with an id that came from a client. Resolves false when the session is not
   * known here and its id names no other gateway, and when it is here but cannot be sent it (not
   * authenticated yet, its socket closing, a plain HTTP exchange); rejects with -32009 Broker
   * unavailable (a JsonRpcError) when the broker did not take the message, and with publish's
   * RangeError, sending nothing, when `params` nest deeper than MAX_ENCODED_DEPTH (512 levels), and
   * its TypeError when a string of them holds a lone surrogate (assertEncodable).
   */
  notifySession(sessionId: string, method: string, params?: Params): Promise<boolean> {
    try {
      // Here, where it enters: a session on another node is refused on this one, unsent.
      assertEncodableParams(params);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    return this.router.notifySession(sessionId, method, params);
  }

  /**
   * Notify every session of a user (GatewayOptions.userOf), on every gateway sharing the
   * broker. With `userInbox`, the message is kept, numbered, in the user's inbox and resolves
   * with its number there (clients that subscribe `$inbox` get it exactly once, even across
   * reconnects); without, it reaches the sessions connected now and resolves undefined.
   * Rejects with -32009 Broker unavailable (a JsonRpcError) when the broker did not take it,
   * -32003 when a user's first inbox message finds the node's budget for new topics spent, and
   * like notifySession when `params` cannot be sent in every encoding, sending nothing.
   */
  notifyUser(user: string, method: string, params?: Params): Promise<number | undefined> {
    try {
      // Before the broker: no node, and no inbox, is handed what no connection could be sent.
      assertEncodableParams(params);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    return this.router.notifyUser(user, method, params);
  }

  /**
   * Close every session of `user` (GatewayOptions.userOf), on every gateway sharing the
   * broker, with close code 4403 and `reason`, and keep the user out for `denyForMs` (default
   * 1 h, at most 24 h): authenticating the user is refused (HTTP 401; -32010 `revoked` in-band
   * and on refresh) unless `identity.issuedAtOf` says its credentials were issued after the
   * revocation. Resolves with how many sessions were closed on this gateway. Rejects with
   * -32009 Broker unavailable when the broker did not take it (this gateway's sessions of the
   * user are closed regardless), with a TypeError on a broker without a deny list.
   */
  revokeUser(user: string, options?: RevokeUserOptions): Promise<number> {
    return this.revocations.revokeUser(user, options);
  }

  /**
   * Close one session, on whichever gateway holds it, with close code 4403 and `reason`; its
   * credentials are not listed (revokeUser keeps a user out). Resolves false when the session
   * is not here and its id names no other gateway; rejects with -32009 when the broker did not
   * take it. The same caution as notifySession about ids that came from a client.
   */
  revokeSession(sessionId: string, options?: RevokeSessionOptions): Promise<boolean> {
    return this.revocations.revokeSession(sessionId, options);
  }

  /**
   * `session.join(topic, options)` for a session on whichever gateway holds it. Resolves true
   * once it is subscribed, false when no such session is open (here, or on the gateway its id
   * names); rejects as a subscribe would (-32602, -32004, -32005, -32003, -32009), with -32009
   * when the broker did not take the request, and with TimeoutError when that gateway did not
   * answer within 10 s. The same caution as notifySession about ids that came from a client.
   */
  join(sessionId: string, topic: string, options?: JoinOptions): Promise<boolean> {
    return this.membership.joinById(sessionId, topic, options);
  }

  /**
   * `session.leave(topic)` for a session on whichever gateway holds it: resolves with whether it
   * had a subscription to the topic to end; rejects like `join` when the request went unanswered.
   */
  leave(sessionId: string, topic: string): Promise<boolean> {
    return this.membership.leaveById(sessionId, topic);
  }

  /**
   * Messages between the gateways sharing the broker, for a layer built on them (the server
   * API's calls to clients on other nodes, its subscriber counts): one channel per gateway.
   * @internal
   */
  openNodeChannel(receive: (body: unknown) => void): Promise<NodeChannel> {
    return this.router.openChannel(receive);
  }

  /**
   * Whether `user` has a session open: on any node sharing the broker with `clusterEvents` (as
   * this node last heard from the others), else on this one.
   */
  isUserOnline(user: string): boolean {
    return this.lifecycle.isUserOnline(user);
  }

  /** Open sessions by id. */
  get sessions(): ReadonlyMap<string, Session<C>> {
    return this.sessionTable.live;
  }

  get isReady(): boolean {
    return this.readiness === 'ready';
  }

  /** What /readyz reports: ready, or why not. */
  get readiness(): Readiness {
    if (this.closing) return 'draining';
    if (!this.httpServer.listening) return 'not-listening';
    // A gateway whose broker is down cannot publish: the load balancer should send clients elsewhere.
    if (!this.pubsub.broker.ready || this.router.pending) return 'broker-unavailable';
    return this.readinessConditions.notReady() ?? 'ready';
  }

  /**
   * Hold /readyz (and `isReady`) at 503 while `condition` says why not, until the function
   * returned is called: for a layer started on the gateway whose work the node takes from
   * elsewhere (the server API's broker consumer).
   * @internal
   */
  addReadinessCondition(condition: ReadinessCondition): () => void {
    return this.readinessConditions.add(condition);
  }

  /**
   * Start the HTTP server listening, the gateway's own or one it was given; `close()` then
   * stops it too. (A server the application starts itself is the application's to stop.)
   */
  listen(port = 8080, host = '127.0.0.1'): Promise<AddressInfo> {
    const started = this.start(port, host);
    // The shutdown waits for it: what a start under way begins after close() must not outlive it.
    this.starting = started.catch(() => undefined);
    return started;
  }

  private async start(port: number, host: string): Promise<AddressInfo> {
    const unlessClosing = (): void => {
      if (this.closing) throw new Error('The gateway is closing: it does not listen');
    };
    unlessClosing();
    await this.intake.codecsLoaded; // an encoding whose package is missing fails here, by name
    unlessClosing();
    await this.router.start();
    unlessClosing();
    this.lifecycle.start();
    this.startedServer = true;
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      this.httpServer.once('error', onError);
      this.httpServer.listen(port, host, () => {
        this.httpServer.off('error', onError);
        // A listening server's error (an accept that failed: out of file descriptors, memory)
        // is logged: with nobody listening, the event would end the process.
        this.httpServer.on('error', (err) => this.logger.error({ err }, 'http server error'));
        const address = this.httpServer.address() as AddressInfo;
        this.logger.info(
          { host: address.address, port: address.port, path: this.path },
          'gateway listening',
        );
        resolve(address);
      });
    });
  }

  /**
   * Serve the same methods over TCP, one JSON-RPC message per line (newline-delimited JSON),
   * in both directions, subscriptions included; with the `tls` option, over TLS. Connections
   * go through the same admission (limits per address) and `authenticate` hook, called with
   * `transport: 'tcp'` and no headers. Resolves once listening.
   */
  async listenTcp(port = 0, host = '127.0.0.1'): Promise<AddressInfo> {
    await this.startNode();
    return this.intake.listenTcp(port, host);
  }

  /**
   * What every way of taking connections starts first, as listen() does: taking what other
   * nodes send this node's sessions (the router: started once, never rejects) and the lifecycle
   * lease of its users. Nothing once closing.
   */
  private async startNode(): Promise<void> {
    if (this.closing) return;
    await this.router.start();
    if (!this.closing) this.lifecycle.start();
  }

  /**
   * Serve one connection over a pair of streams, newline-delimited JSON: a process's own
   * stdin and stdout (`gateway.serveStream(process.stdin, process.stdout)`, the way language
   * servers and MCP servers talk; log to stderr then), or a child's. `authenticate` is called
   * with `transport: 'stdio'`. Resolves with the session, or rejects if it was refused.
   */
  async serveStream(
    input: Readable,
    output: Writable,
    kind: 'stdio' | 'tcp' = 'stdio',
  ): Promise<Session<C>> {
    // Not waited for: the streams are taken (their error listeners on) at once, whatever the
    // broker takes to answer, as a pipe is served broker or not (an error on an unlistened
    // stream would end the process).
    void this.startNode();
    const session = await this.intake.acceptStream(input, output, kind, undefined);
    if (!session) throw new Error('the stream connection was refused (see the log)');
    return session;
  }

  /**
   * Graceful drain (what SIGTERM should do): readiness turns 503, new upgrades are refused,
   * every client gets an `rpc.reconnect` notice and an `rpc.ping`, calls arriving after the
   * notice are answered -32006, and each session is closed with 1012 once its calls are done
   * both ways, its output has left and its client has answered the ping (see drainSession), or
   * at the deadline. Then `beforeClose`, if given, and the gateway closes as `close()` does,
   * broker included.
   */
  drain(options: DrainOptions = {}): Promise<void> {
    // A later caller's beforeClose runs too, when it comes before the drain's own close.
    if (options.beforeClose) this.beforeCloses?.push(options.beforeClose);
    // Every caller, first or later, waits for the same drain: each session is told once.
    this.drainPromise ??=
      this.closePromise ??
      (async () => {
        this.closing = true;
        this.beforeCloses ??= options.beforeClose ? [options.beforeClose] : [];
        await drainSessions(this.sessionTable.live, this.httpRpc, this.logger, options);
        const beforeCloses = this.beforeCloses;
        // Those that come from here on find the close under way: it does not wait for them.
        this.beforeCloses = undefined;
        for (const beforeClose of beforeCloses) {
          await beforeClose().catch((err: unknown) => {
            this.logger.warn({ err }, 'drain: beforeClose failed');
          });
        }
        return this.close({ code: CloseCode.ServiceRestart, reason: 'service restart' });
      })();
    return this.drainPromise;
  }

  /**
   * Stop: refuse new connections, close every session with `code`, wait for
   * them (up to `timeoutMs`, then cut them off), and close the HTTP server when the gateway
   * created it or `listen()` started it. On a server it was given, the gateway then takes its
   * listeners off and leaves the server to the application (listening, if the application
   * started it; its other connections untouched).
   */
  close(options: CloseOptions = {}): Promise<void> {
    // Every caller, first or later, waits for the same complete shutdown.
    this.closePromise ??= this.shutdown(options);
    return this.closePromise;
  }

  private async shutdown(options: CloseOptions): Promise<void> {
    this.closing = true;
    // A listen() under way stops at its next step, or finishes what it began: torn down below.
    await this.starting;
    // Its members leave now, on every node, rather than when its lease lapses.
    await this.presenceService.close();
    const parts = {
      logger: this.logger,
      intake: this.intake,
      sessions: this.sessionTable,
      heartbeat: this.heartbeat,
      httpRpc: this.httpRpc,
      ownServer: this.ownsServer ? this.httpServer : undefined,
      router: this.router,
      ownBroker: this.ownsBroker ? this.pubsub.broker : undefined,
    };
    await shutdown(parts, options);
    this.membership.close();
    await this.lifecycle.stop();
    if (this.ownsServer) return;
    if (this.startedServer) await stopListening(this.httpServer, options.timeoutMs ?? 5_000);
    this.leaveServer();
  }
}

/**
 * The per-call authorization: the session's method claims (`identity.methodsOf`), then the
 * application's `authorize`; both must allow. The subscription methods (subscribe, unsubscribe,
 * history) are left to `topicsOf`, which authorizes a subscribe and a history read by their
 * topic. Without `methodsOf`, the application's hook as it is (nothing added per call).
 */
function withMethodClaims<C>(
  appAuthorize: PeerConfig<Session<C>>['authorize'],
  methodsOf: GatewayConfig<C>['identity']['methodsOf'],
  exempt: readonly string[],
): PeerConfig<Session<C>>['authorize'] {
  if (!methodsOf) return appAuthorize;
  return (method, params, session) => {
    if (
      !exempt.includes(method) &&
      !claimsAllow(methodsOf, session.context, method, session.logger, 'methodsOf')
    ) {
      return false;
    }
    return appAuthorize ? appAuthorize(method, params, session) : true;
  };
}

/**
 * The socket bounds of a server the gateway was given: only those the application set in
 * `limits` (`set`), since at the 'connection' event nothing tells whether a socket is the
 * gateway's or the application's; none at all unless it set one.
 */
function sharedServerGate(
  set: readonly (keyof GatewayLimits)[],
  limits: Readonly<Required<GatewayLimits>>,
  proxies: TrustedProxies | undefined,
  cut: (reason: SocketCut, remoteAddress: string | undefined) => void,
): SocketGate | undefined {
  const has = (limit: keyof SocketLimits): boolean => set.includes(limit);
  if (!has('maxHttpSockets') && !has('maxHttpSocketsPerIp') && !has('headersTimeoutMs')) {
    return undefined;
  }
  const bounds: SocketLimits = {
    maxHttpSockets: has('maxHttpSockets') ? limits.maxHttpSockets : Infinity,
    maxHttpSocketsPerIp: has('maxHttpSocketsPerIp') ? limits.maxHttpSocketsPerIp : Infinity,
    headersTimeoutMs: has('headersTimeoutMs') ? limits.headersTimeoutMs : 0,
  };
  return new SocketGate(bounds, proxies, cut);
}

/**
 * Stop a server the gateway was given but started (`listen()`): no new connections, idle ones
 * closed, the application's requests under way given `timeoutMs` to finish before they are cut.
 * Sockets another WebSocket endpoint upgraded are not the gateway's to close.
 */
async function stopListening(server: HttpServer, timeoutMs: number): Promise<void> {
  if (!server.listening) return;
  await new Promise<void>((resolve) => {
    // A kept-alive connection whose request ends now stays open until its keepAliveTimeout:
    // closed as soon as it is idle.
    const idle = setInterval(() => server.closeIdleConnections(), 50);
    const cut = setTimeout(() => {
      server.closeAllConnections();
      closeServedUpgrades(server);
      done();
    }, timeoutMs);
    function done(): void {
      clearInterval(idle);
      clearTimeout(cut);
      resolve();
    }
    server.close(done);
    server.closeIdleConnections();
  });
}

/** Create a gateway; call `listen()` to start it. */
export function createGateway<C = unknown>(options: GatewayOptions<C> = {}): Gateway<C> {
  return new Gateway<C>(options);
}

/** The entries of `first`, then those of `second` (if any). */
function* chain<A, B>(first: Iterable<A>, second: Iterable<B> | undefined): Generator<A | B> {
  yield* first;
  if (second) yield* second;
}
