import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * What /readyz says: `ready` (200), or why not (503): `draining` (drain or close under way),
 * `broker-unavailable` (the broker is down: new connections are refused), `not-listening`,
 * `server-api-consumer-unavailable` (the server API's broker consumer cannot read: from its
 * start until it first does, and from a lost broker until it reads again).
 */
export type Readiness =
  'ready' | 'draining' | 'broker-unavailable' | 'not-listening' | 'server-api-consumer-unavailable';

/** Why a layer on the gateway is not ready, or undefined while it is. */
export type ReadinessCondition = () => Exclude<Readiness, 'ready'> | undefined;

/**
 * The conditions layers started on a gateway add to its readiness, asked in the order added:
 * the first that names a reason is the one /readyz reports.
 */
export class ReadinessConditions {
  private readonly conditions = new Set<{ condition: ReadinessCondition }>();

  /** Add `condition`; the function returned removes it (once; again does nothing). */
  add(condition: ReadinessCondition): () => void {
    // Wrapped: the same function added twice is two conditions, each removed by its own call.
    const entry = { condition };
    this.conditions.add(entry);
    return () => void this.conditions.delete(entry);
  }

  /** The first reason a condition gives, or undefined when none does. */
  notReady(): Exclude<Readiness, 'ready'> | undefined {
    for (const { condition } of this.conditions) {
      const reason = condition();
      if (reason !== undefined) return reason;
    }
    return undefined;
  }
}

/** Liveness (`routes.livez`): the process runs and answers. */
export function serveLivez(res: ServerResponse): void {
  sendJson(res, 200, { status: 'ok' });
}

/** Readiness (`routes.readyz`): a load balancer's view of the gateway. */
export function serveReadyz(
  res: ServerResponse,
  state: { status: Readiness; sessions: number },
): void {
  sendJson(res, state.status === 'ready' ? 200 : 503, {
    status: state.status,
    sessions: state.sessions,
  });
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  res.end(text);
}

/** Whether a request carries a body (whether or not any of it has been read). */
export function mayHaveBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * The answer about to be sent goes before the request's body was read: the connection is closed
 * after it, so a body still coming (however slowly) holds no socket open. Node would otherwise
 * read the rest of the body to keep the connection alive.
 */
export function closeUnread(req: IncomingMessage, res: ServerResponse): void {
  if (!res.headersSent && mayHaveBody(req)) res.setHeader('connection', 'close');
}

/**
 * The answer about to be sent refuses the request (401/403, 404, 405, 429, 503): its connection
 * is closed after it, body or not, so a client refused goes on with nothing it was refused on,
 * as a refused upgrade's socket is closed.
 */
export function closeRefused(res: ServerResponse): void {
  if (!res.headersSent) res.setHeader('connection', 'close');
}

/**
 * CORS for a page on an allowed origin (listed, or without a list on the request's host), the
 * same on every HTTP route (POST `/rpc`, the event stream's): it may read the answers, and the
 * Retry-After of a refusal (CORS hides it otherwise, and the client would wait its own guess
 * instead). With `credentials` (Admission.grantsCredentials: an origin the gateway names or a
 * predicate decides, not `["*"]`) it may read them with its cookies sent (they go with its
 * requests as they go with a WebSocket upgrade, and `authenticate` may read them); without,
 * the browser refuses the page an answer to a request that carried them.
 */
export function grantOrigin(res: ServerResponse, origin: string, credentials = true): void {
  res.setHeader('access-control-allow-origin', origin);
  if (credentials) res.setHeader('access-control-allow-credentials', 'true');
  res.setHeader('access-control-expose-headers', 'retry-after');
  res.setHeader('vary', 'Origin');
}

export function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}
