import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../peer/logger.js';
import { sendText, serveHealth } from './http-routes.js';
import type { Readiness } from './http-routes.js';
import type { HttpRpc } from './http-rpc.js';
import type { GatewayMetrics } from './metrics.js';
import type { GatewayOptions } from './options.js';

export interface HttpDispatchDeps<C> {
  /** Read per request (`metrics`, `httpHandler`). */
  options: GatewayOptions<C>;
  /** The RPC endpoint's path (WebSocket upgrades and POSTs). */
  path: string;
  logger: Logger;
  metrics: GatewayMetrics;
  httpRpc: Pick<HttpRpc<C>, 'handle' | 'preflight'>;
  readiness(): Readiness;
  sessionCount(): number;
  /** The OpenRPC document, serialised, once `serveDiscovery` was called. */
  discovery(): string | undefined;
}

/**
 * The gateway's port answers plain HTTP too. This is its routing table in one place, in the
 * order it is consulted: health, `/openrpc.json`, `/metrics`, the RPC path (POST is JSON-RPC
 * over HTTP; a GET there gets 426, telling a browser or curl user to upgrade), then the
 * application's own `httpHandler`, then 404. WebSocket upgrades never come here.
 */
export async function dispatchHttpRequest<C>(
  deps: HttpDispatchDeps<C>,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  try {
    if (serveHealth(req, res, { status: deps.readiness(), sessions: deps.sessionCount() })) return;
    const path = (req.url ?? '/').split('?', 1)[0];
    const discovery = deps.discovery();
    if (path === '/openrpc.json' && discovery !== undefined) {
      res.writeHead(200, {
        'content-type': 'application/json; charset=utf-8',
        'access-control-allow-origin': '*',
      });
      res.end(discovery);
      return;
    }
    if (path === '/metrics' && deps.options.metrics !== false) {
      const text = await deps.metrics.render();
      res.writeHead(200, {
        'content-type': deps.metrics.contentType,
        'cache-control': 'no-store',
      });
      res.end(text);
      return;
    }
    if (path === deps.path) {
      if (req.method === 'POST') return await deps.httpRpc.handle(req, res);
      if (req.method === 'OPTIONS') return deps.httpRpc.preflight(req, res);
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.setHeader('allow', 'GET, POST, OPTIONS');
        sendText(
          res,
          405,
          'Use POST for JSON-RPC over HTTP, or GET with an Upgrade for WebSocket.\n',
        );
        return;
      }
      res.setHeader('upgrade', 'websocket');
      sendText(
        res,
        426,
        'This endpoint speaks JSON-RPC over WebSocket (send an Upgrade request) or over HTTP POST.\n',
      );
      return;
    }
    if (deps.options.httpHandler && (await deps.options.httpHandler(req, res))) return;
    sendText(res, 404, 'Not found\n');
  } catch (err) {
    deps.logger.error({ err }, 'http handler failed');
    if (!res.headersSent) sendText(res, 500, 'Internal server error\n');
    else res.destroy();
  }
}
