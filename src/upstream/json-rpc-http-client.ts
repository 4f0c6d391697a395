import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import { UpstreamError } from './upstream-error.js';
import { UpstreamEndpoint } from './upstream-endpoint.js';
import type { UpstreamEndpointOptions, UpstreamRequest } from './upstream-endpoint.js';
import { readReply } from './read-reply.js';
import { requestText } from './request-text.js';

export interface JsonRpcHttpClientOptions extends UpstreamEndpointOptions {
  /** The JSON-RPC endpoint (http or https) requests are POSTed to. */
  url: string;
  /**
   * The most sockets of the pool. Fewer than `maxConcurrent` lets a call admitted wait for a
   * socket other calls hold: a configuration file gives at least `maxConcurrent`
   * (upstreams-config.ts, resolveConnections).
   */
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

/** The code undici gives a reply past the pool's maxResponseSize; a streamed one gets it too. */
const TOO_LARGE = 'UND_ERR_RES_EXCEEDED_MAX_SIZE';

/**
 * JSON-RPC 2.0 over HTTP POST to one upstream, on an undici keep-alive Pool of `connections`
 * sockets. A request carries the gateway's own id; a notification has none and any 2xx takes it.
 * The upstream's JSON-RPC error rejects as a JsonRpcError unchanged; everything else that is not
 * a JSON-RPC response rejects as an UpstreamError (-32011, -32012 on the timeout, -32013 beyond
 * `maxConcurrent`).
 *
 * Requests go through the pool's `dispatch` with a handler that gathers the body's chunks
 * (ReplyReader), not `request`, which makes a body stream, an async resource and an abort
 * listener per call: on a routed call that was most of the gateway's own JavaScript work.
 *
 * A request waiting in the pool's queue cannot be taken out of it: aborted, it stays there, body
 * and all, until a socket frees and undici starts it (the handler then aborts it unsent). Its
 * call keeps its maxConcurrent slot until then (`keepsAbortedRequests`), so what the pool holds
 * is bounded by `maxConcurrent` whatever the callers cancel. The queue drains within the timeout
 * of the requests ahead, each aborted by its own timer.
 */
export class JsonRpcHttpClient extends UpstreamEndpoint {
  protected override readonly keepsAbortedRequests = true;
  private readonly pool: Pool;
  private readonly path: string;
  private readonly fixedHeaders: readonly (readonly [string, string])[];

  constructor(private readonly http: JsonRpcHttpClientOptions) {
    super(http);
    const url = new URL(http.url);
    this.path = `${url.pathname}${url.search}`;
    this.fixedHeaders = Object.entries(http.headers ?? {});
    this.pool = new Pool(url.origin, {
      connections: http.connections,
      // One request per socket at a time: pipelined, a request would wait on its socket behind
      // another call's slow answer, whoever made it, whatever the sockets free.
      pipelining: 1,
      // The endpoint's own timer bounds each attempt (UpstreamCallOptions.timeoutMs).
      headersTimeout: 0,
      bodyTimeout: 0,
      maxResponseSize: http.maxReplyBytes,
    });
  }

  protected attempt(request: UpstreamRequest): Promise<unknown> {
    // The request's headers are its own: the fixed ones join them there (the request's win).
    const headers = request.headers;
    for (const [name, value] of this.fixedHeaders) if (!(name in headers)) headers[name] = value;
    headers['content-type'] = 'application/json';
    return new Promise<unknown>((resolve, reject) => {
      this.pool.dispatch(
        { method: 'POST', path: this.path, headers, body: requestText(request) },
        new ReplyReader(
          request,
          this.http.maxReplyBytes,
          (status, body) => {
            try {
              resolve(this.answerOf(request, status, body));
            } catch (err) {
              reject(err as Error);
            }
          },
          (err) => reject(this.transportError(err, request) as Error),
        ),
      );
    });
  }

  /** The call's outcome from the upstream's HTTP answer (throws its error). */
  private answerOf(request: UpstreamRequest, status: number, body: Buffer): unknown {
    const ok = status >= 200 && status < 300;
    if (request.id === undefined) {
      if (!ok) throw new UpstreamError('unavailable', this.name, `status ${status}`);
      return undefined;
    }
    return readReply(
      body,
      request.id,
      this.name,
      ok ? undefined : status,
      request.onResultText,
      this.replyLimits,
    );
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }

  private transportError(err: unknown, request: UpstreamRequest): unknown {
    if (request.aborted) return request.abortReason;
    if (err instanceof UpstreamError) return err;
    const code = (err as { code?: string }).code;
    const detail = err instanceof Error ? err.message : String(err);
    if (code === TOO_LARGE) {
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

/** The body of a notification's answer, which is not kept. */
const EMPTY = Buffer.alloc(0);

/**
 * One request's undici handler: the status and the body's chunks, refused past `maxBytes` (the
 * pool's maxResponseSize covers a declared length, this a streamed one). The attempt's abort
 * (timeout, the caller's cancel) aborts the request, closing its socket, once it has started,
 * or as soon as it starts. Undici calls onResponseEnd or onResponseError once for every request,
 * aborted or not (when aborted at onRequestStart, at once): the attempt settles only then, but
 * for a notification, settled by its status, whose call keeps its slot until then instead.
 */
class ReplyReader implements Dispatcher.DispatchHandler {
  private status = 0;
  private size = 0;
  private readonly chunks: Buffer[] = [];
  private controller: Dispatcher.DispatchController | undefined;
  private done = false;
  /** Bounds the read of a taken notification's body. */
  private drain: NodeJS.Timeout | undefined;
  /** Frees the slot a taken notification keeps while its body is read (its socket held). */
  private letGo: (() => void) | undefined;

  constructor(
    private readonly request: UpstreamRequest,
    private readonly maxBytes: number,
    private readonly resolve: (status: number, body: Buffer) => void,
    private readonly reject: (err: unknown) => void,
  ) {
    request.onAbort((reason) => this.controller?.abort(reason as Error));
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    if (this.request.aborted) controller.abort(this.request.abortReason as Error);
    else this.controller = controller;
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number): void {
    // An interim 102 or 103 comes here before the answer, whose status follows. A 100 Continue
    // never does: undici's HTTP/1.1 parser (client-h1.js, onHeadersComplete) destroys the socket
    // on one ("bad response", as it never sends `Expect: 100-continue`), so an upstream that sends
    // it fails that call -32011 "connection failed", after the request reached it.
    if (statusCode < 200) return;
    this.status = statusCode;
    // A notification is taken by its 2xx status: settled now, so no timeout while its body is
    // awaited fails it (it would be sent again, or counted as never delivered), and the client
    // that sent it waits for nothing more. The body is still read to the end, to give the
    // socket back to the pool, for at most the attempt's timeout and `maxBytes`; its call keeps
    // its slot and shares until then, the socket being its own until then.
    if (this.request.id === undefined && statusCode < 300 && !this.done && !this.request.aborted) {
      this.done = true;
      this.letGo = this.request.keepAfterAnswer();
      this.resolve(statusCode, EMPTY);
      const drain = setTimeout(
        () => this.controller?.abort(new Error('notification answer body not read in time')),
        this.request.timeoutMs,
      );
      drain.unref();
      this.drain = drain;
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.size += chunk.length;
    if (this.letGo !== undefined) return this.drainData(controller);
    if (this.done) return;
    if (this.size > this.maxBytes) {
      this.fail(Object.assign(new Error(`reply over ${this.maxBytes} bytes`), { code: TOO_LARGE }));
      controller.abort(new Error('reply too large'));
      return;
    }
    this.chunks.push(chunk);
  }

  /**
   * A taken notification's body: its answer was its status, so the body is neither kept nor a
   * failure, but read only up to `maxBytes`, as a call's reply is: past that the socket is given
   * up, its slot freed, rather than held to read an endless body.
   */
  private drainData(controller: Dispatcher.DispatchController): void {
    if (this.size > this.maxBytes) controller.abort(new Error('notification reply too large'));
  }

  onResponseEnd(): void {
    this.drained();
    if (this.done) return;
    this.done = true;
    this.controller = undefined;
    const { chunks } = this;
    // Bytes, not text: readReply refuses a body that is not UTF-8.
    this.resolve(this.status, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, err: Error): void {
    this.drained();
    this.fail(err);
  }

  /** The request's socket is let go (its reply read to the end, or given up): free its slot. */
  private drained(): void {
    clearTimeout(this.drain);
    const letGo = this.letGo;
    this.letGo = undefined;
    letGo?.();
  }

  private fail(err: unknown): void {
    if (this.done) return;
    this.done = true;
    this.controller = undefined;
    this.reject(err);
  }
}
