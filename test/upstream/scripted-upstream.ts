import { createServer } from 'node:http';
import type { ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { JsonRpcHttpClient } from '../../src/upstream/index.js';

/** An HTTP upstream answering each request as `answer` says, and a JsonRpcHttpClient of it. */
export interface ScriptedUpstream {
  readonly client: JsonRpcHttpClient;
  close(): Promise<void>;
}

/**
 * A plain `node:http` upstream that reads each request's body and hands its id and method to
 * `answer`, with a JsonRpcHttpClient of it (4 calls, `connections` sockets, no retries).
 */
export async function startScriptedUpstream(
  name: string,
  answer: (request: { id?: number; method: string }, res: ServerResponse) => void,
  { maxReplyBytes, connections = 4 }: { maxReplyBytes: number; connections?: number },
): Promise<ScriptedUpstream> {
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => answer(JSON.parse(body) as { id?: number; method: string }, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const client = new JsonRpcHttpClient({
    name,
    url: `http://127.0.0.1:${port}/rpc`,
    maxConcurrent: 4,
    connections,
    retries: 0,
    maxReplyBytes,
  });
  return {
    client,
    async close() {
      await client.close();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
