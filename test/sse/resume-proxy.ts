/**
 * A real HTTP proxy in front of a gateway's events route that answers the session's resumes (a
 * GET naming the session) from a script, as a proxy or load balancer between a client and the
 * gateway may: forwarded ('200'), refused with a status, or cut before any answer ('network
 * error'). Everything else (the opening GET, POSTs, DELETE) and a resume with no answer left in
 * the script is forwarded. It records each resume's Last-Event-ID and how many resumes it was
 * answering at once.
 */
import { createServer, request } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

export type ResumeAnswer =
  '200' | '429' | '429 past the cap' | '503' | '503 dated' | '503 bare' | '404' | 'network error';

/** Seconds past the client's wait cap (30 s): a Retry-After the client does not wait out. */
const PAST_THE_CAP_SECONDS = 31;

export class ResumeProxy {
  /** Answers for the next resumes, in order. */
  readonly script: ResumeAnswer[] = [];
  /** Each resume: its Last-Event-ID, and the answer it got. */
  readonly resumes: { lastEventId: string | undefined; answer: ResumeAnswer }[] = [];
  /** Resumes being answered now (a request in, its answer not yet ended), and the most ever. */
  answering = 0;
  mostAnsweringAtOnce = 0;
  port = 0;
  private server: Server | undefined;
  /** Drops the forwarded event stream in place, if any. */
  private dropCurrent: (() => void) | undefined;

  constructor(private readonly targetPort: number) {}

  async start(): Promise<number> {
    const server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    this.port = typeof address === 'object' && address ? address.port : 0;
    this.server = server;
    return this.port;
  }

  /** Drop the forwarded event stream, as a network that loses it would. */
  dropStream(): void {
    this.dropCurrent?.();
  }

  async close(): Promise<void> {
    this.dropStream();
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const resuming = req.method === 'GET' && req.headers['x-wsrpc-session'] !== undefined;
    if (!resuming) return this.forward(req, res, req.method === 'GET');
    const answer = this.script.shift() ?? '200';
    const lastEventId = req.headers['last-event-id'];
    this.resumes.push({
      lastEventId: Array.isArray(lastEventId) ? lastEventId[0] : lastEventId,
      answer,
    });
    this.answering++;
    this.mostAnsweringAtOnce = Math.max(this.mostAnsweringAtOnce, this.answering);
    let answered = false;
    const done = (): void => {
      if (answered) return;
      answered = true;
      this.answering--;
    };
    if (answer === '200') return this.forward(req, res, true, done);
    if (answer === 'network error') {
      done();
      req.socket.destroy();
      return;
    }
    const status = Number(answer.slice(0, 3));
    const headers: Record<string, string> = { connection: 'close', 'content-type': 'text/plain' };
    if (answer === '429' || answer === '503') headers['retry-after'] = '0';
    if (answer === '429 past the cap') headers['retry-after'] = String(PAST_THE_CAP_SECONDS);
    if (answer === '503 dated') headers['retry-after'] = new Date(Date.now()).toUTCString();
    req.resume();
    res.writeHead(status, headers);
    done();
    res.end(`${answer}\n`);
  }

  /** Pass the request to the gateway and its answer back; a `stream` can be dropped. */
  private forward(
    req: IncomingMessage,
    res: ServerResponse,
    stream = false,
    done?: () => void,
  ): void {
    const upstream = request({
      host: '127.0.0.1',
      port: this.targetPort,
      method: req.method,
      path: req.url,
      headers: req.headers,
    });
    const drop = (): void => {
      if (this.dropCurrent === drop) this.dropCurrent = undefined;
      done?.();
      upstream.destroy();
      res.socket?.destroy();
    };
    if (stream) {
      this.dropCurrent?.();
      this.dropCurrent = drop;
      res.once('close', drop);
    }
    upstream.on('error', () => res.socket?.destroy());
    upstream.on('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    req.pipe(upstream);
  }
}
