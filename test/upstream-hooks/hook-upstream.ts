// A JSON-RPC 2.0 upstream in this process for the hooks' tests: each method answers as the test
// says (a result, an error, never), every request is recorded, and it stops and starts again on
// its port (an upstream that goes down and comes back).
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface HookRequest {
  method: string;
  params: Record<string, unknown>;
  headers: IncomingHttpHeaders;
}

/**
 * What a method answers: its result, `{ error }`, `'hang'` (no answer until stopped), or
 * `'hold'` (no answer until `releaseHeld`, which answers it as the method answers then).
 */
export type HookAnswer =
  | { result: unknown }
  | { error: { code: number; message: string; data?: unknown } }
  | 'hang'
  | 'hold';

export interface HookUpstream {
  readonly url: string;
  readonly requests: HookRequest[];
  /** Answer `method` with this from now on (default: -32601). */
  answer(
    method: string,
    answer: HookAnswer | ((params: Record<string, unknown>) => HookAnswer),
  ): void;
  /** Requests of one method. */
  of(method: string): HookRequest[];
  /** Answer every request held by `'hold'`, each as its method answers now. */
  releaseHeld(): void;
  stop(): Promise<void>;
  /** Listen again on the same port. */
  start(): Promise<void>;
}

export async function startHookUpstream(): Promise<HookUpstream> {
  const answers = new Map<string, HookAnswer | ((params: Record<string, unknown>) => HookAnswer)>();
  const requests: HookRequest[] = [];
  const sockets = new Set<Socket>();
  const held: (() => void)[] = [];
  let server: Server;
  let port = 0;

  const listen = async (): Promise<void> => {
    server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        const message = JSON.parse(body) as {
          id?: number;
          method: string;
          params?: Record<string, unknown>;
        };
        const params = message.params ?? {};
        requests.push({ method: message.method, params, headers: req.headers });
        const reply = (): void => {
          const configured = answers.get(message.method);
          const answer = typeof configured === 'function' ? configured(params) : configured;
          if (answer === 'hang') return;
          if (answer === 'hold') {
            held.push(reply);
            return;
          }
          respond(answer);
        };
        const respond = (answer: Exclude<HookAnswer, 'hang' | 'hold'> | undefined): void => {
          if (message.id === undefined) {
            res.writeHead('error' in (answer ?? {}) ? 500 : 204).end();
            return;
          }
          const member = answer ?? { error: { code: -32601, message: 'Method not found' } };
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, ...member }));
        };
        reply();
      });
    });
    server.on('connection', (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  };
  await listen();

  return {
    url: `http://127.0.0.1:${port}/rpc`,
    requests,
    answer: (method, answer) => answers.set(method, answer),
    of: (method) => requests.filter((r) => r.method === method),
    releaseHeld() {
      for (const reply of held.splice(0)) reply();
    },
    async stop() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    start: listen,
  };
}
