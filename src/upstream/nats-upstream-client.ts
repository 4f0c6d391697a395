import type * as NatsTransport from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { JsonRpcError } from '../protocol/errors.js';
import { UpstreamError } from './upstream-error.js';
import { UpstreamEndpoint } from './upstream-endpoint.js';
import type { UpstreamEndpointOptions, UpstreamRequest } from './upstream-endpoint.js';
import { readReply } from './read-reply.js';
import { requestText } from './request-text.js';

type NatsModule = typeof NatsTransport;

export interface NatsUpstreamClientOptions extends UpstreamEndpointOptions {
  servers: readonly string[];
  /** Requests go to this subject; a responder (or a queue group of them) answers. */
  subject: string;
  /** A reply larger than this is -32011 (the gateway's maxMessageBytes). */
  maxReplyBytes: number;
}

/** Loads the NATS client, an optional peer dependency, only when a NATS upstream is configured. */
async function loadNats(): Promise<NatsModule> {
  try {
    return await import('@nats-io/transport-node');
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    throw new Error(
      'A NATS upstream needs @nats-io/transport-node, an optional peer dependency of wsrpc-gateway: npm install @nats-io/transport-node',
      { cause: err },
    );
  }
}

/**
 * JSON-RPC 2.0 over NATS request-reply: the request is the payload, the identity headers are
 * NATS message headers, the reply (a JSON-RPC response) is read as over HTTP. A notification is
 * published without a reply subject. A cancelled or timed-out request's reply is ignored, and
 * the call's slot is held until it comes or NATS gives up on it.
 */
export class NatsUpstreamClient extends UpstreamEndpoint {
  /**
   * A request given up stays pending in the NATS client until its reply or NATS's own timeout
   * (`timeoutMs` + 1 s): the call keeps its slot until then, so cancelling calls cannot make the
   * gateway hold more pending NATS requests than maxConcurrent.
   */
  protected override readonly keepsAbortedRequests = true;
  private link: Promise<{ nats: NatsModule; connection: NatsConnection }> | undefined;
  private closed = false;

  constructor(private readonly natsOptions: NatsUpstreamClientOptions) {
    super(natsOptions);
  }

  /**
   * Loads the client and connects: rejects naming @nats-io/transport-node when it is not
   * installed, or with the connection's error. Calls connect on their own when needed.
   */
  connect(): Promise<{ nats: NatsModule; connection: NatsConnection }> {
    this.link ??= (async () => {
      const nats = await loadNats();
      const connection = await nats.connect({
        servers: [...this.natsOptions.servers],
        name: `wsrpc-gateway upstream ${this.name}`,
        maxReconnectAttempts: -1,
      });
      if (this.closed) await connection.close();
      return { nats, connection };
    })();
    // A failed first connect is tried again by the next call.
    this.link.catch(() => (this.link = undefined));
    return this.link;
  }

  protected async attempt(request: UpstreamRequest): Promise<unknown> {
    let link: { nats: NatsModule; connection: NatsConnection };
    try {
      link = await this.connect();
    } catch (err) {
      const detail = err instanceof Error ? err.message : String(err);
      throw new UpstreamError('unavailable', this.name, 'not connected', detail, true);
    }
    const headers = link.nats.headers();
    for (const [name, value] of Object.entries(request.headers)) headers.set(name, value);
    const payload = requestText(request);
    const { subject, maxReplyBytes } = this.natsOptions;
    try {
      if (request.id === undefined) {
        link.connection.publish(subject, payload, { headers });
        return undefined;
      }
      // The endpoint's timer aborts first; NATS's own timeout, a little later, frees the reply's slot.
      const pending = link.connection.request(subject, payload, {
        headers,
        timeout: request.timeoutMs + 1_000,
      });
      const reply = await pending;
      if (reply.data.length > maxReplyBytes) {
        throw new UpstreamError('unavailable', this.name, 'reply too large');
      }
      return readReply(reply.string(), request.id, this.name);
    } catch (err) {
      if (request.aborted || err instanceof UpstreamError || err instanceof JsonRpcError) throw err;
      const detail = err instanceof Error ? err.message : String(err);
      const noResponders =
        err instanceof Error && /no responders/i.test(`${err.message} ${String(err.cause)}`);
      throw new UpstreamError(
        'unavailable',
        this.name,
        noResponders ? 'no responders' : 'request failed',
        detail,
        noResponders,
      );
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const link = await this.link?.catch(() => undefined);
    await link?.connection.close();
  }
}
