import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { httpGet } from '../support/network.js';
import { Resources } from '../support/resources.js';
import { within } from '../support/waiting.js';
import { watchEventLoop } from './event-loop-watchdog.js';

const res = new Resources();
afterEach(() => res.cleanup());

// The gateway runs in this process: should its event loop stop, the watchdog fails the file.
let stopWatching: () => void;
beforeAll(() => (stopWatching = watchEventLoop()));
afterAll(() => stopWatching());

/** About 1 MiB of text that compresses little: each reply keeps ws's compressor busy a while. */
const BLOB = randomBytes(768 * 1024).toString('base64');
/** Eight such replies: twice the default maxBufferedBytes (4 MiB), all waiting to be compressed. */
const BURST = 8;

/** A ws client (permessage-deflate offered) keeping every message it reads. */
async function deflateClient(url: string) {
  const socket = res.track(new WebSocket(url, { perMessageDeflate: true }));
  const messages: { id?: unknown; result?: unknown; error?: { code: number } }[] = [];
  socket.on('message', (data: Buffer) => messages.push(JSON.parse(data.toString('utf8'))));
  socket.on('error', () => undefined);
  await within(
    new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    }),
    'the WebSocket to open',
  );
  expect(socket.extensions).toContain('permessage-deflate');
  return {
    socket,
    messages,
    /** Send every text in one TCP write, so the gateway reads (and handles) them in one go. */
    sendTogether(texts: string[]): void {
      const raw = (socket as unknown as { _socket: Duplex })._socket;
      raw.cork();
      for (const text of texts) socket.send(text);
      raw.uncork();
    },
    async until(count: number, what: string): Promise<void> {
      await within(
        new Promise<void>((resolve) => {
          const look = (): void => {
            if (messages.length >= count) resolve();
            else setTimeout(look, 5);
          };
          look();
        }),
        what,
      );
    },
  };
}

/** The gateway stays live: /livez answers and a second client's call is answered. */
async function expectLive(url: string, httpUrl: string): Promise<void> {
  expect((await within(httpGet(`${httpUrl}/livez`), '/livez')).status).toBe(200);
  const other = await deflateClient(url);
  other.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 'other', method: 'rpc.ping' }));
  await other.until(1, "the second client's reply");
  expect(other.messages[0]).toMatchObject({ id: 'other', result: 'pong' });
}

describe('permessage-deflate: replies waiting in the compressor', () => {
  it('a burst of calls whose replies pass maxBufferedBytes before compression: every reply arrives, the gateway stays live', async () => {
    const { gateway, url, httpUrl } = await res.gateway({ perMessageDeflate: true });
    gateway.method('blob', () => BLOB);
    const client = await deflateClient(url);

    client.sendTogether(
      Array.from({ length: BURST }, (_, id) =>
        JSON.stringify({ jsonrpc: '2.0', id, method: 'blob' }),
      ),
    );
    // Asked while the replies are on their way.
    await expectLive(url, httpUrl);

    await client.until(BURST, `${BURST} replies of 1 MiB`);
    expect(client.messages.map((m) => m.id)).toEqual([...Array(BURST).keys()]);
    for (const m of client.messages) expect(m.result).toBe(BLOB);
    await expectLive(url, httpUrl);
  });

  it('a burst of invalid requests whose 1 MiB ids are echoed in their errors: every error arrives, the gateway stays live', async () => {
    // One reply alone passes this bound while ws compresses it, however fast the compressor
    // keeps up with reading the next request.
    const limits = { maxBufferedBytes: 512 * 1024 };
    const { url, httpUrl } = await res.gateway({ perMessageDeflate: true, limits });
    const client = await deflateClient(url);
    // Just under the default maxMessageBytes (1 MiB) once framed as a request.
    const ids = Array.from({ length: BURST }, () => randomBytes(786_000).toString('base64'));

    client.sendTogether(ids.map((id) => JSON.stringify({ jsonrpc: '2.0', id, method: 5 })));
    await expectLive(url, httpUrl);

    await client.until(BURST, `${BURST} errors echoing 1 MiB ids`);
    expect(client.messages.map((m) => m.id)).toEqual(ids);
    for (const m of client.messages) expect(m.error?.code).toBe(-32600);
    await expectLive(url, httpUrl);
  });
});
