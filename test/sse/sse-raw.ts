/** A raw HTTP streaming client for tests: the event stream read event by event, and POSTs. */
import { request } from 'node:http';
import type { IncomingMessage } from 'node:http';

export interface SseEvent {
  id: string | undefined;
  event: string;
  data: string;
}

export interface RawStream {
  status: number;
  body: string;
  response: IncomingMessage;
  events: SseEvent[];
  /** The session's id and secret, from the stream's first event. */
  session: { session: string; secret: string; lastEventId: number };
  /** Resolves with the events once `test` holds for them (checked on every event). */
  until(test: (events: SseEvent[]) => boolean, timeoutMs?: number): Promise<SseEvent[]>;
  /** The JSON of the data events (not the session, close or comment lines). */
  messages(): unknown[];
  ended: Promise<void>;
  destroy(): void;
}

/** Parse complete events out of `buffer`; returns what is left (an event not ended yet). */
function parse(buffer: string, into: SseEvent[]): string {
  let at: number;
  while ((at = buffer.indexOf('\n\n')) >= 0) {
    const block = buffer.slice(0, at);
    buffer = buffer.slice(at + 2);
    const event: SseEvent = { id: undefined, event: 'message', data: '' };
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'id') event.id = value;
      else if (field === 'event') event.event = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length === 0) continue; // a comment (heartbeat)
    event.data = data.join('\n');
    into.push(event);
  }
  return buffer;
}

export interface StreamOptions {
  headers?: Record<string, string>;
  /** Leave the body unread (a client that never reads). */
  noRead?: boolean;
}

/** GET the event stream at `url`. Resolves once the headers (and, on 200, the first event) came. */
export function openStream(url: string, options: StreamOptions = {}): Promise<RawStream> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', headers: options.headers ?? {} }, (response) => {
      const events: SseEvent[] = [];
      const waiters = new Set<() => void>();
      let buffer = '';
      let body = '';
      let settled = false;
      const ended = new Promise<void>((done) => {
        response.on('end', done);
        response.on('close', done);
        response.on('error', done);
      });
      const stream: RawStream = {
        status: response.statusCode ?? 0,
        body: '',
        response,
        events,
        session: { session: '', secret: '', lastEventId: 0 },
        async until(test, timeoutMs = 5_000) {
          const deadline = Date.now() + timeoutMs;
          while (!test(events)) {
            if (Date.now() > deadline) {
              throw new Error(`timed out; events so far: ${JSON.stringify(events)}`);
            }
            await new Promise<void>((wake) => {
              waiters.add(wake);
              setTimeout(wake, 50);
            });
          }
          return events;
        },
        messages: () =>
          events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as unknown),
        ended,
        destroy: () => req.destroy(),
      };
      if (options.noRead) {
        response.pause();
        resolve(stream);
        return;
      }
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        if (stream.status !== 200) {
          body += chunk;
          return;
        }
        buffer = parse(buffer + chunk, events);
        const first = events[0];
        if (!settled && first?.event === 'session') {
          settled = true;
          stream.session = JSON.parse(first.data) as RawStream['session'];
          resolve(stream);
        }
        for (const wake of waiters) wake();
        waiters.clear();
      });
      response.on('end', () => {
        stream.body = body;
        if (!settled) resolve(stream);
      });
      response.on('error', () => undefined);
    });
    req.on('error', reject);
    req.end();
  });
}

/** POST `body` to the session; resolves with the status and the response's text. */
export function post(
  url: string,
  session: { session: string; secret: string },
  body: string,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-wsrpc-session': session.session,
          'x-wsrpc-secret': session.secret,
        },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The headers that resume a session's stream after `lastEventId`. */
export function resumeHeaders(
  session: { session: string; secret: string },
  lastEventId: string | number,
): Record<string, string> {
  return {
    'x-wsrpc-session': session.session,
    'x-wsrpc-secret': session.secret,
    'last-event-id': String(lastEventId),
  };
}

export interface RawResponse {
  status: number;
  headers: IncomingMessage['headers'];
  text: string;
}

/** Any request to `url` (a preflight, a POST with an Origin...): its status, headers and text. */
export function exchange(
  url: string,
  method: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, text }),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The headers naming a session (POST, DELETE), plus `extra`. */
export function sessionHeaders(
  session: { session: string; secret: string },
  extra: Record<string, string> = {},
): Record<string, string> {
  return { 'x-wsrpc-session': session.session, 'x-wsrpc-secret': session.secret, ...extra };
}
