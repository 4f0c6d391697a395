// One JSON-RPC exchange over HTTP POST, with the headers and source address a test needs: for
// tests of what an exchange counts against (per user, per address) on a real gateway.
import { request } from 'node:http';
import type { RawReply } from './raw-rpc.js';

export interface PostAnswer {
  status: number;
  /** The Retry-After header, when sent. */
  retryAfter: string | undefined;
  body: string;
  /** The JSON-RPC response of a 200. */
  reply: RawReply | undefined;
}

/**
 * POST `message` (a JSON-RPC request) to `url`, with `token` as a Bearer header when given, from
 * the loopback address `from` when given (every 127/8 address is loopback on Linux), on a
 * connection of its own.
 */
export function postRpc(
  url: string,
  message: { id?: number; method: string; params?: unknown },
  options: { token?: string; from?: string } = {},
): Promise<PostAnswer> {
  const body = JSON.stringify({ jsonrpc: '2.0', ...message });
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent: false,
        localAddress: options.from,
        headers: {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          const retryAfter = res.headers['retry-after'];
          resolve({
            status,
            retryAfter,
            body: text,
            reply: status === 200 ? (JSON.parse(text) as RawReply) : undefined,
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
