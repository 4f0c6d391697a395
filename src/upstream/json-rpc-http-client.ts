import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import { UpstreamError } from './upstream-error.js';
import { UpstreamEndpoint } from './upstream-endpoint.js';
import type { UpstreamEndpointOptions, UpstreamRequest } from './upstream-endpoint.js';
import { readReply } from './read-reply.js';

export interface JsonRpcHttpClientOptions extends UpstreamEndpointOptions {
  /** The JSON-RPC endpoint (http or https) requests are POSTed to. */
  url: string;
  /** Keep-alive connections in the pool. */
  connections: number;
  /** A reply body larger than this is -32011 (the gateway's maxMessageBytes). */
  maxReplyBytes: number;
  /** Sent with every request. */
  headers?: Readonly<Record<string, string>>;
}

/**
 * Errors that mean the request never left: nothing reached the upstream, so it is safe to send
 * again whatever the method does.
 */
const UNSENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * JSON-RPC 2.0 over HTTP POST to one upstream, on an undici keep-alive Pool of `connections`
 * sockets. A request carries the gateway's own id; a notification has none and any 2xx takes it.
 * The upstream's JSON-RPC error rejects as a JsonRpcError unchanged; everything else that is not
 * a JSON-RPC response rejects as an UpstreamError (-32011, -32012 on the timeout, -32013 beyond
 * `maxConcurrent`).
 */
export class JsonRpcHttpClient extends UpstreamEndpoint {
  private readonly pool: Pool;
  private readonly path: string;
  private readonly fixedHeaders: Readonly<Record<string, string>>;

  constructor(private readonly http: JsonRpcHttpClientOptions) {
    super(http);
    const url = new URL(http.url);
    this.path = `${url.pathname}${url.search}`;
    this.fixedHeaders = http.headers ?? {};
    this.pool = new Pool(url.origin, {
      connections: http.connections,
      pipelining: 1,
      // The endpoint's own timer bounds each attempt (UpstreamCallOptions.timeoutMs).
      headersTimeout: 0,
      bodyTimeout: 0,
      maxResponseSize: http.maxReplyBytes,
    });
  }

  protected async attempt(request: UpstreamRequest): Promise<unknown> {
    const message: Record<string, unknown> = { jsonrpc: '2.0', method: request.method };
    if (request.params !== undefined) message['params'] = request.params;
    if (request.id !== undefined) message['id'] = request.id;
    let response: Dispatcher.ResponseData;
    try {
      response = await this.pool.request({
        method: 'POST',
        path: this.path,
        headers: {
          ...this.fixedHeaders,
          ...request.headers,
          'content-type': 'application/json',
        },
        body: JSON.stringify(message),
        signal: request.signal,
      });
    } catch (err) {
      throw this.transportError(err, request.signal);
    }
    const { statusCode, body } = response;
    let text: string;
    try {
      text = await readBody(body, this.http.maxReplyBytes);
    } catch (err) {
      throw this.transportError(err, request.signal);
    }
    const ok = statusCode >= 200 && statusCode < 300;
    if (request.id === undefined) {
      if (!ok) throw new UpstreamError('unavailable', this.name, `status ${statusCode}`);
      return undefined;
    }
    return readReply(text, request.id, this.name, ok ? undefined : statusCode);
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }

  private transportError(err: unknown, signal: AbortSignal): unknown {
    if (signal.aborted) return signal.reason;
    if (err instanceof UpstreamError) return err;
    const code = (err as { code?: string }).code;
    const detail = err instanceof Error ? err.message : String(err);
    if (code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE') {
      return new UpstreamError('unavailable', this.name, 'reply too large', detail);
    }
    const unsent = code !== undefined && UNSENT_CODES.has(code);
    return new UpstreamError(
      'unavailable',
      this.name,
      unsent ? 'connection refused' : 'connection failed',
      `${code ?? ''} ${detail}`.trim(),
      unsent,
    );
  }
}

/** The body as text, refused past `maxBytes` (the pool's maxResponseSize covers a declared length). */
async function readBody(body: Dispatcher.ResponseData['body'], maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) {
      body.destroy();
      throw Object.assign(new Error(`reply over ${maxBytes} bytes`), {
        code: 'UND_ERR_RES_EXCEEDED_MAX_SIZE',
      });
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
