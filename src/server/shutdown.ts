import type { Server as HttpServer } from 'node:http';
import type { WebSocket } from 'ws';
import type { Logger } from '../peer/logger.js';
import { ReservedMethod } from '../protocol/reserved.js';
import type { Broker } from '../pubsub/broker.js';
import { CloseCode } from '../transport/transport.js';
import { SseTransport } from '../transport/sse-transport.js';
import { WsTransport } from '../transport/ws-transport.js';
import type { ConnectionIntake } from './connection-intake.js';
import type { Heartbeat } from './heartbeat.js';
import { closeServedUpgrades } from './http-dispatch.js';
import type { HttpRpc } from './http-rpc.js';
import type { Session } from './session.js';
import type { SessionRouter } from './session-router.js';
import type { SessionTable } from './session-table.js';

/*
 * Closing gracefully: one session once its calls are done, and the whole gateway (drain,
 * then close). Kept apart because the order of the teardown is the point: what is stopped
 * first decides what clients see (a reconnect notice, a close code, a 503) and what may
 * still run (HTTP handlers that publish need the broker until they finish).
 */

export interface DrainOptions {
  /** How long in-flight calls may take to finish before their sessions are closed anyway. Default 10 000 ms. */
  deadlineMs?: number;
  /** Sent in the rpc.reconnect notice: where clients should go instead (optional). */
  reconnectUrl?: string;
  /**
   * Run once every session is drained, before the gateway closes (its HTTP server, its broker):
   * close here what must serve until the sessions are gone and needs them no longer, such as a
   * server API on the gateway's port. Its failure is logged; the close goes on. Given to a drain
   * already under way, it runs too, if the drain's sessions are not all drained yet.
   */
  beforeClose?: () => Promise<void>;
}

export interface CloseOptions {
  /** Close code sent to every client. Default 1001 (going away). */
  code?: number;
  reason?: string;
  /** How long to wait for clients to finish the closing handshake before cutting them off. Default 5 000 ms. */
  timeoutMs?: number;
}

/** How long a drain waits for a client's answer to its rpc.ping (the barrier) at most. */
export const DRAIN_PING_WAIT_MS = 2_000;

/** Close `session` once it has no call in flight, or at `deadline` anyway. */
export async function closeWhenIdle<C>(
  session: Session<C>,
  deadline: number,
  code: number = CloseCode.ServiceRestart,
  reason = 'service restart',
): Promise<void> {
  // Polling is enough here: it runs once per session close, for at most the deadline.
  while (!session.isClosed && session.peer.inFlightCount > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  session.close(code, reason);
}

/**
 * The first half of a drain (the caller has already set the gateway closing): tell every
 * client to reconnect, stop taking calls, and close each session once its calls are done,
 * while HTTP exchanges under way finish; all by the deadline.
 */
export async function drainSessions<C>(
  live: ReadonlyMap<string, Session<C>>,
  httpRpc: Pick<HttpRpc<C>, 'settled'>,
  logger: Logger,
  options: DrainOptions,
): Promise<void> {
  const deadline = Date.now() + (options.deadlineMs ?? 10_000);
  const sessions = [...live.values()];
  logger.info({ sessions: sessions.length }, 'draining');
  await Promise.all([
    ...sessions.map((session) => drainSession(session, options, deadline)),
    httpRpc.settled(deadline - Date.now()),
  ]);
}

/**
 * Move one client elsewhere without loss: the rpc.reconnect notice (with `reconnectUrl`, if
 * given), no new calls (-32006), and the close (1012) once the client has closed, or once its
 * calls are done both ways, nothing sent to it waits to leave, and it has answered an rpc.ping
 * sent after the notice (or DRAIN_PING_WAIT_MS passed without an answer), or at the deadline. The ping is the barrier for what the client sent before it read the notice: its
 * answer comes after those frames, so each of them has been read, and answered (-32006 if it
 * came after the notice) before the close; closed when idle alone, the gateway would drop a
 * call still on its way, and the client would be told only that the connection closed. Its
 * client reconnects at once and resumes its subscriptions from their last seq.
 */
export function drainSession<C>(
  session: Session<C>,
  options: DrainOptions = {},
  deadline = Date.now() + (options.deadlineMs ?? 10_000),
): Promise<void> {
  if (session.isClosed) return Promise.resolve();
  session.peer.stopAcceptingCalls();
  session.notify(
    ReservedMethod.Reconnect,
    options.reconnectUrl ? { url: options.reconnectUrl } : {},
  );
  let barrier = false;
  // Any answer will do (an error too: a client that has no rpc.ping still answers in order).
  // One that answers no call at all (it drops what it did not ask for) is waited for no longer
  // than DRAIN_PING_WAIT_MS: its calls crossing the notice are then what the barrier cannot save.
  let pingOut = true;
  const passed = (): void => void (barrier = true);
  const waited = setTimeout(passed, Math.min(DRAIN_PING_WAIT_MS, deadline - Date.now()));
  waited.unref();
  session
    // No timeout of its own: the close ends it (a timeout would send rpc.cancel).
    .call(ReservedMethod.Ping, undefined, { timeoutMs: 0 })
    .then(passed, passed)
    .finally(() => {
      pingOut = false;
      clearTimeout(waited);
    });
  return closeWhenDone(
    session,
    deadline,
    () => barrier,
    () => (pingOut ? 1 : 0),
  );
}

/**
 * Close `session` (1012) once it is closed already, or has no call in flight either way (the
 * client's, the server's own to the client), holds nothing unsent (a large reply still leaving,
 * an event stream away with its events in the replay buffer: closed then, they would be lost)
 * and `passed()`, or at `deadline` anyway.
 */
async function closeWhenDone<C>(
  session: Session<C>,
  deadline: number,
  passed: () => boolean,
  /** Of the gateway's calls to the client, those the drain made itself (its ping, unanswered). */
  ownCalls: () => number,
): Promise<void> {
  const { transport } = session;
  const unsent = (): boolean =>
    transport instanceof SseTransport ? transport.holdsUndelivered : transport.bufferedAmount > 0;
  const busy = (): boolean =>
    session.peer.inFlightCount > 0 ||
    session.peer.pendingCount > ownCalls() ||
    !passed() ||
    unsent();
  // Polling, as closeWhenIdle: once per session drained, for at most the deadline.
  while (!session.isClosed && busy() && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  session.close(CloseCode.ServiceRestart, 'service restart');
}

/** What the gateway tears down, in `shutdown`'s order. */
export interface ShutdownParts<C> {
  logger: Logger;
  intake: Pick<ConnectionIntake<C>, 'closeTcpListeners' | 'closeWebSocketServer'>;
  sessions: Pick<SessionTable<C>, 'live' | 'complete'>;
  heartbeat: Pick<Heartbeat, 'stop'>;
  httpRpc: Pick<HttpRpc<C>, 'settled' | 'closeAll'>;
  /** The HTTP server, when the gateway created it (one passed in is the application's to close). */
  ownServer: HttpServer | undefined;
  router: Pick<SessionRouter, 'stop'>;
  /** The broker, when the gateway created it. */
  ownBroker: Broker | undefined;
}

/**
 * Stop (the caller has already set the gateway closing): refuse new connections, close every
 * session with `code`, wait for them (up to `timeoutMs`, then cut them off), and close the
 * HTTP server.
 */
export async function shutdown<C>(parts: ShutdownParts<C>, options: CloseOptions): Promise<void> {
  const code = options.code ?? CloseCode.GoingAway;
  parts.intake.closeTcpListeners();
  const sessions = [...parts.sessions.live.values()];
  // WebSockets finish their closing handshake; waiting for it lets clients see the code.
  const sockets = sessions
    .map((session) => session.transport)
    .filter((transport) => transport instanceof WsTransport)
    .map((transport) => transport.socket);
  for (const session of sessions) session.close(code, options.reason ?? 'server shutting down');
  await waitForSockets(sockets, options.timeoutMs ?? 5_000);
  parts.heartbeat.stop();
  parts.intake.closeWebSocketServer();
  parts.sessions.complete();
  // HTTP requests already taken finish (their handlers may still publish) before the
  // server and the broker go; new ones have been answered 503 since `closing` was set.
  await parts.httpRpc.settled(options.timeoutMs ?? 5_000);
  parts.httpRpc.closeAll();
  const server = parts.ownServer;
  if (server?.listening) {
    await new Promise<void>((resolve) => {
      // It stops listening at once; its callback waits for every socket, and another gateway's
      // upgraded sockets on this server are that gateway's to close: not waited for past this.
      const cut = setTimeout(resolve, options.timeoutMs ?? 5_000);
      server.close(() => {
        clearTimeout(cut);
        resolve();
      });
      server.closeAllConnections();
      closeServedUpgrades(server);
    });
  }
  await parts.router.stop();
  if (parts.ownBroker) await parts.ownBroker.close();
  parts.logger.info('gateway closed');
}

async function waitForSockets(sockets: WebSocket[], timeoutMs: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
  const allClosed = Promise.all(
    sockets.map((socket) => {
      if (socket.readyState === socket.CLOSED) return Promise.resolve();
      return new Promise<void>((resolve) => socket.once('close', () => resolve()));
    }),
  );
  await Promise.race([allClosed, deadline]);
  clearTimeout(timer);
  for (const socket of sockets) if (socket.readyState !== socket.CLOSED) socket.terminate();
}
