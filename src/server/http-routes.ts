import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * What /readyz says: `ready` (200), or why not (503): `draining` (drain or close under way),
 * `broker-unavailable` (the broker is down: new connections are refused), `not-listening`.
 */
export type Readiness = 'ready' | 'draining' | 'broker-unavailable' | 'not-listening';

/** Health endpoints on the gateway's own port: a load balancer's view of it. */
export function serveHealth(
  req: IncomingMessage,
  res: ServerResponse,
  state: { status: Readiness; sessions: number },
): boolean {
  const path = (req.url ?? '/').split('?', 1)[0];
  if (path === '/livez') {
    sendJson(res, 200, { status: 'ok' });
    return true;
  }
  if (path === '/readyz') {
    sendJson(res, state.status === 'ready' ? 200 : 503, {
      status: state.status,
      sessions: state.sessions,
    });
    return true;
  }
  return false;
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

export function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}
