import { request as httpRequest } from 'node:http';
import type { IncomingMessage, RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { JsonRpcError } from '../protocol/errors.js';
import { strictUtf8 } from '../protocol/invalid-utf8.js';
import { exceedsDepth } from '../protocol/safe-json.js';
import type { ErrorObject, Params } from '../protocol/types.js';
import type { ConnectOptions, RpcConnection } from './connection.js';
import type { Deadline } from './deadline.js';
import type { Endpoint } from './endpoint.js';
import { ConnectionError } from './errors.js';
import { keepNumbers, writeKeptNumbers } from './kept-numbers.js';
import { MAX_DEPTH, MAX_MESSAGE_BYTES, mebibytes, nestedTooDeep, notUtf8 } from './limits.js';
import type { HttpAnswer } from './network-messages.js';
import {
  describeHttpStatus,
  describeNetworkError,
  notAResponse,
  timeoutMessage,
} from './network-messages.js';
import { MAX_REFUSAL_BODY, REFUSAL_BODY_MS, readBody } from './read-body.js';
import { malformedAnswer, parsedOrNot } from './response-shape.js';

/** An answer with its body's bytes as they came (`body` has U+FFFD for those that are not UTF-8). */
interface PostAnswer extends HttpAnswer {
  bytes: Buffer;
}

/** JSON-RPC over HTTP: each call or notification is one POST to the endpoint URL. */
export class HttpConnection implements RpcConnection {
  private nextId = 1;

  constructor(
    readonly endpoint: Endpoint,
    private readonly options: ConnectOptions,
  ) {}

  async call(method: string, params: Params | undefined, deadline: Deadline): Promise<unknown> {
    const id = this.nextId++;
    const answer = await this.post({ jsonrpc: '2.0', method, params, id }, deadline);
    if (answer.status !== 200) throw new ConnectionError(describeHttpStatus(answer, this.endpoint));
    // The body as the server sent it: never with U+FFFD in place of bytes that are not UTF-8.
    const body = strictUtf8(answer.bytes);
    if (body === undefined) throw new ConnectionError(notUtf8(this.endpoint.hostPort));
    // Parsed, the result would be printed by a recursion that deep.
    if (exceedsDepth(body, MAX_DEPTH)) {
      throw new ConnectionError(nestedTooDeep(this.endpoint.hostPort));
    }
    // A number a double cannot hold is kept as the server wrote it (keepNumbers).
    const parsed = parsedOrNot(keepNumbers(body));
    // As over ws:// and tcp:// (GuardedTransport): what is not a response is no answer at all.
    const malformed = malformedAnswer(parsed);
    if (malformed !== undefined) {
      throw new ConnectionError(notAResponse(this.endpoint, body, malformed, answer.status));
    }
    const response = parsed as { result?: unknown; error?: ErrorObject };
    if (response.error !== undefined) throw JsonRpcError.fromErrorObject(response.error);
    return response.result;
  }

  async notify(method: string, params: Params | undefined, deadline: Deadline): Promise<void> {
    const answer = await this.post({ jsonrpc: '2.0', method, params }, deadline, true);
    // 204 is the answer to a notification; any other 2xx also means it was taken.
    if (answer.status < 200 || answer.status >= 300) {
      throw new ConnectionError(describeHttpStatus(answer, this.endpoint));
    }
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /** `statusOnly`: a 2xx is the answer (a notification's), its body not read. */
  private post(
    message: Record<string, unknown>,
    deadline: Deadline,
    statusOnly = false,
  ): Promise<PostAnswer> {
    // PARAMS' numbers as the user typed them (kept as marked strings: keepNumberTexts).
    const body = writeKeptNumbers(JSON.stringify(message));
    const { endpoint, options } = this;
    const attempt = { endpoint, timeoutMs: deadline.timeoutMs };
    const requestOptions: RequestOptions & { rejectUnauthorized?: boolean; ca?: string } = {
      method: 'POST',
      headers: {
        ...options.headers,
        'content-type': 'application/json',
        accept: 'application/json',
        'content-length': Buffer.byteLength(body),
      },
      agent: false,
    };
    if (endpoint.secure) {
      requestOptions.rejectUnauthorized = !options.insecure;
      if (options.ca !== undefined) requestOptions.ca = options.ca;
    }
    const request = endpoint.secure ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      let settled = false;
      const remaining = deadline.remaining();
      const timer =
        remaining === undefined
          ? undefined
          : setTimeout(() => fail(new ConnectionError(timeoutMessage(attempt))), remaining);
      const req = request(endpoint.url, requestOptions, (response: IncomingMessage) => {
        const status = response.statusCode ?? 0;
        const taken = status >= 200 && status < 300;
        if (taken && statusOnly) {
          // Taken: whatever the body is, or however long it runs, it answers nothing more.
          settled = true;
          clearTimeout(timer);
          resolve({ status, body: '', bytes: Buffer.alloc(0), headers: response.headers });
          response.destroy();
          return;
        }
        // A refusal's body is only quoted: a little of it, for a little while.
        const read = taken
          ? readBody(response, MAX_MESSAGE_BYTES)
          : readBody(response, MAX_REFUSAL_BODY, REFUSAL_BODY_MS);
        read.then(
          ({ bytes, overflowed }) => {
            if (taken && overflowed) {
              const limit = mebibytes(MAX_MESSAGE_BYTES);
              const message = `${endpoint.hostPort} sent a body larger than ${limit} (the CLI's limit); it was not read`;
              return fail(new ConnectionError(message));
            }
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            resolve({ status, body: bytes.toString('utf8'), bytes, headers: response.headers });
          },
          (err: Error) => fail(new ConnectionError(describeNetworkError(err, attempt))),
        );
      });
      function fail(err: ConnectionError): void {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(err);
        req.destroy();
      }
      req.on('error', (err) => fail(new ConnectionError(describeNetworkError(err, attempt))));
      req.end(body);
    });
  }
}
