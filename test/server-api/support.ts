/**
 * What the server API's tests share: a gateway whose users come from the URL (`?user=<name>`),
 * the API started on it with a key, and a POST of one JSON-RPC request as a backend sends it.
 */
import { silentLogger } from '../../src/peer/logger.js';
import type { Broker } from '../../src/pubsub/broker.js';
import type { Gateway } from '../../src/server/gateway.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { resolveServerApiConfig, startServerApi } from '../../src/server-api/index.js';
import type { ServerApi } from '../../src/server-api/index.js';
import { noTracing } from '../../src/tracing/index.js';
import { Resources } from '../support/resources.js';

export const API_KEY = 'test-key-0123456789abcdef';

/** Users from the URL: `?user=<name>`; none is anonymous. */
export function userOptions(broker?: Broker): GatewayOptions<{ user?: string }> {
  return {
    ...(broker ? { broker } : {}),
    authenticate: ({ query }) => {
      const user = query.get('user');
      if (user === '') throw new UpgradeRejection(401);
      return user ? { user } : {};
    },
    userOf: (context) => context.user,
  };
}

export function asUser(url: string, user: string): string {
  return `${url}?user=${encodeURIComponent(user)}`;
}

/** The server API on its own loopback port, with API_KEY and `settings` over it. */
export async function startApi(
  gateway: Gateway<any>, // eslint-disable-line @typescript-eslint/no-explicit-any -- any context
  settings: Record<string, unknown> = {},
): Promise<ServerApi & { url: string }> {
  const config = resolveServerApiConfig({
    listen: { host: '127.0.0.1', port: 0 },
    keys: [API_KEY],
    ...settings,
  });
  const api = await startServerApi(gateway, config, { logger: silentLogger, tracing: noTracing });
  return api as ServerApi & { url: string };
}

/**
 * Resources that also start server APIs (`api`, as startApi does) and close them in `cleanup()`,
 * all at once and before the rest: an API calls into its gateway and the gateway's sessions, so
 * it stops before they do.
 */
export class ApiResources extends Resources {
  readonly apis: ServerApi[] = [];

  async api(
    gateway: Gateway<any>, // eslint-disable-line @typescript-eslint/no-explicit-any -- any context
    settings: Record<string, unknown> = {},
  ): Promise<ServerApi & { url: string }> {
    const api = await startApi(gateway, settings);
    this.apis.push(api);
    return api;
  }

  override async cleanup(): Promise<void> {
    await Promise.all(this.apis.splice(0).map((api) => api.close()));
    await super.cleanup();
  }
}

export interface RpcReply {
  status: number;
  body: { result?: unknown; error?: { code: number; message: string; data?: unknown } } | undefined;
}

/** POST one request to the API (`key` null: no Authorization header); the status and the parsed reply. */
export async function post(
  url: string,
  method: string,
  params?: unknown,
  key: string | null = API_KEY,
): Promise<RpcReply> {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key === null ? {} : { authorization: `Bearer ${key}` }),
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const text = await response.text();
  return {
    status: response.status,
    body: response.headers.get('content-type')?.startsWith('application/json')
      ? (JSON.parse(text) as RpcReply['body'])
      : undefined,
  };
}

/** The result of a call that must succeed. */
export async function call<T = Record<string, unknown>>(
  url: string,
  method: string,
  params?: unknown,
): Promise<T> {
  const reply = await post(url, method, params);
  if (reply.status !== 200 || !reply.body || reply.body.error) {
    throw new Error(`${method} failed: ${reply.status} ${JSON.stringify(reply.body)}`);
  }
  return reply.body.result as T;
}

/**
 * Work held until the test lets it all go, counting how much is under way at once (`peak`): to
 * see a bound on reads or publishes the node makes at once.
 */
export class HeldGate {
  running = 0;
  peak = 0;
  private held: (() => void)[] | undefined = [];

  async through<T>(work: () => Promise<T>): Promise<T> {
    this.running++;
    this.peak = Math.max(this.peak, this.running);
    try {
      if (this.held) await new Promise<void>((resolve) => this.held!.push(resolve));
      return await work();
    } finally {
      this.running--;
    }
  }

  letGo(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const resolve of held) resolve();
  }
}
