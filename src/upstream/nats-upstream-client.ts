import type * as NatsTransport from '@nats-io/transport-node';
import type { Msg, MsgHdrs, NatsConnection } from '@nats-io/transport-node';
import { JsonRpcError } from '../protocol/errors.js';
import { UpstreamError } from './upstream-error.js';
import { UpstreamEndpoint } from './upstream-endpoint.js';
import type { UpstreamEndpointOptions, UpstreamRequest } from './upstream-endpoint.js';
import { readReply } from './read-reply.js';
import { requestText } from './request-text.js';
import { natsServerOptions } from '../pubsub/nats-servers.js';

type NatsModule = typeof NatsTransport;

export interface NatsUpstreamClientOptions extends UpstreamEndpointOptions {
  /** Server URLs; credentials in them are used to connect (see natsServerOptions). */
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

/** The status NATS answers a request with when no one subscribes to its subject. */
const NO_RESPONDERS = 503;

/**
 * JSON-RPC 2.0 over NATS request-reply: the request is the payload, the identity headers are
 * NATS message headers, the reply (a JSON-RPC response) is read as over HTTP. A notification is
 * published without a reply subject. Each request has its own reply inbox, unsubscribed however
 * the request ends (answered, cancelled, timed out, or refused by the NATS client before it
 * left): the NATS client lets go of it at once, and a late reply reaches no one (the inbox is
 * never reused, so it cannot be taken for another request's).
 *
 * The NATS client queues what is published and never pushes back: a slow or stalled link would
 * hold request after request in it. So a request keeps its slot until the server has what was
 * published before it (a `flush`, the server's PONG): a notification past its publish, a call
 * given up (timed out, cancelled) past its abort; an answered call's request has arrived. A link
 * that stalls thus holds at most `maxConcurrent` requests, and calls past them are refused
 * (-32013). While the client is disconnected (reconnecting), a request is refused at once as not
 * sent (-32011 `not connected`, retried where retries apply), not published into a queue the
 * client throws away on reconnecting.
 */
export class NatsUpstreamClient extends UpstreamEndpoint {
  /**
   * The slot of a request given up is held until its inbox is unsubscribed, which the abort does
   * before the attempt settles: the call lets go within the same turn.
   */
  protected override readonly keepsAbortedRequests = true;
  private link: Promise<{ nats: NatsModule; connection: NatsConnection }> | undefined;
  private closed = false;
  /** The connection is lost and being made again: nothing published now would be sent. */
  private down = false;
  /** Those waiting for the connection to be lost (see flushed). */
  private onDown: (() => void)[] = [];

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
        ...natsServerOptions(this.natsOptions.servers),
        name: `wsrpc-gateway upstream ${this.name}`,
        maxReconnectAttempts: -1,
      });
      if (this.closed) await connection.close();
      void this.watch(connection);
      return { nats, connection };
    })();
    // A failed first connect is tried again by the next call.
    this.link.catch(() => (this.link = undefined));
    return this.link;
  }

  /** Follow the connection's state (`down` while it is being made again). */
  private async watch(connection: NatsConnection): Promise<void> {
    for await (const status of connection.status()) {
      if (status.type === 'disconnect') {
        this.down = true;
        for (const wake of this.onDown.splice(0)) wake();
      } else if (status.type === 'reconnect') this.down = false;
    }
  }

  /**
   * Resolves once the server has everything published so far (a PING answered), or the
   * connection is lost: till then, what was published may still be in the client's queue. Lost,
   * nothing more is published until it is back (`down` refuses requests), so the queue cannot
   * grow meanwhile (and the client lets go of it on reconnecting).
   */
  private flushed(connection: NatsConnection): Promise<void> {
    if (this.down) return Promise.resolve();
    let wake!: () => void;
    const lost = new Promise<void>((resolve) => (wake = resolve));
    this.onDown.push(wake);
    return Promise.race([connection.flush().catch(() => undefined), lost]).finally(() => {
      const at = this.onDown.indexOf(wake);
      if (at >= 0) this.onDown.splice(at, 1);
    });
  }

  protected async attempt(request: UpstreamRequest): Promise<unknown> {
    let link: { nats: NatsModule; connection: NatsConnection };
    try {
      link = await this.connect();
    } catch (err) {
      const detail = err instanceof Error ? err.message : String(err);
      throw new UpstreamError('unavailable', this.name, 'not connected', detail, true);
    }
    if (this.down) {
      throw new UpstreamError('unavailable', this.name, 'not connected', 'reconnecting', true);
    }
    // Given up while the connection was made (its timeout, its caller gone): reported as failed
    // already, so not sent (a call's exchange checks the same).
    if (request.aborted) throw request.abortReason as Error;
    const headers = link.nats.headers();
    for (const [name, value] of Object.entries(request.headers)) headers.set(name, value);
    const payload = requestText(request);
    const { subject, maxReplyBytes } = this.natsOptions;
    try {
      if (request.id === undefined) {
        link.connection.publish(subject, payload, { headers });
        const letGo = request.keepAfterAnswer();
        void this.flushed(link.connection).then(letGo);
        return undefined;
      }
      const reply = await this.exchange(link, payload, headers, request);
      if (reply.data.length > maxReplyBytes) {
        throw new UpstreamError('unavailable', this.name, 'reply too large');
      }
      return readReply(
        reply.data,
        request.id,
        this.name,
        undefined,
        request.onResultText,
        this.replyLimits,
      );
    } catch (err) {
      if (request.aborted || err instanceof UpstreamError || err instanceof JsonRpcError) throw err;
      const detail = err instanceof Error ? err.message : String(err);
      throw new UpstreamError('unavailable', this.name, 'request failed', detail);
    }
  }

  /**
   * Publish the request with a fresh reply inbox, subscribed for one message, and resolve with
   * the reply. No timer of its own: the endpoint aborts the attempt at its timeout. Every way the
   * exchange settles unsubscribes the inbox (a reply does on its own, `max: 1`), so the NATS
   * client holds nothing past it: the endpoint's timer, which would abort it, is cleared once the
   * attempt settles, so a publish that throws (a payload past the server's max_payload, the
   * connection closed) must let go here.
   */
  private exchange(
    link: { nats: NatsModule; connection: NatsConnection },
    payload: string,
    headers: MsgHdrs,
    request: UpstreamRequest,
  ): Promise<Msg> {
    if (request.aborted) return Promise.reject(request.abortReason as Error);
    const inbox = link.nats.createInbox();
    return new Promise<Msg>((resolve, reject) => {
      const fail = (err: unknown) => {
        if (!subscription.isClosed()) subscription.unsubscribe();
        reject(err as Error);
      };
      const subscription = link.connection.subscribe(inbox, {
        max: 1,
        callback: (err, msg) => {
          if (err) fail(err);
          else if (msg.data.length === 0 && msg.headers?.code === NO_RESPONDERS) {
            fail(new UpstreamError('unavailable', this.name, 'no responders', undefined, true));
          } else resolve(msg);
        },
      });
      let givenUp = false;
      // Closed without a reply (the connection closed, the server dropped the subscription);
      // not the close the abort makes, whose attempt settles once flushed.
      void subscription.closed.then(
        (err) => givenUp || reject(err ?? new Error('reply subscription closed without a reply')),
        (err: unknown) => givenUp || reject(err as Error),
      );
      // Given up, the request may still be in the client's queue: the attempt settles (and its
      // slot is let go) once the server has it, the caller answered at once all the same.
      request.onAbort((reason) => {
        givenUp = true;
        if (!subscription.isClosed()) subscription.unsubscribe();
        void this.flushed(link.connection).then(() => reject(reason as Error));
      });
      try {
        link.connection.publish(this.natsOptions.subject, payload, { headers, reply: inbox });
      } catch (err) {
        fail(err);
      }
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    const link = await this.link?.catch(() => undefined);
    await link?.connection.close();
  }
}
