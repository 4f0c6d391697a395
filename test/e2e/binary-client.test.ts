/**
 * The binary encodings in a real browser: Chromium loads a page with the client and the
 * MessagePack and CBOR codecs, each bundled from src/ for the browser, and with each codec
 * makes a call, answers a server-to-client call and receives a published message. The
 * gateway sees the codec's subprotocol and binary frames only; the page sees binary frames
 * only, both ways.
 */
import { build } from 'esbuild';
import type { Browser } from 'playwright-core';
import type { RawData } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../../src/index.js';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import { browserMissing, launchChromium } from '../support/browser.js';
import { startGateway } from '../support/gateway.js';

const missing = browserMissing();
if (missing) console.warn(`[e2e] binary client tests skipped: ${missing}`);

const page = `<!doctype html><script type="module">
import { createClient } from '/client.js';
import { msgpack } from '/msgpack.js';
import { cbor } from '/cbor.js';
const codecs = { msgpack, cbor };
window.run = async (name) => {
  // The frame types the page's socket sends and receives.
  const sent = new Set();
  const received = new Set();
  class RecordingWebSocket extends WebSocket {
    constructor(url, protocols) {
      super(url, protocols);
      this.addEventListener('message', (event) =>
        received.add(typeof event.data === 'string' ? 'text' : 'binary'),
      );
    }
    send(data) {
      sent.add(typeof data === 'string' ? 'text' : 'binary');
      super.send(data);
    }
  }
  const client = createClient({
    url: 'ws://' + location.host + '/rpc',
    encoding: codecs[name],
    WebSocket: RecordingWebSocket,
  });
  client.method('client.name', () => 'chromium over ' + name);
  const sum = await client.call('add', [20, 22.5]);
  const asked = await client.call('ask');
  let message;
  const subscription = client.subscribe('feed').subscribe((m) => (message ??= m));
  // The subscription is live once the reply accepting it is written: publish until it arrives.
  for (let i = 0; i < 200 && message === undefined; i++) {
    await client.call('publish', [{ name, text: 'é ✓', list: [1, null, true] }]);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  subscription.unsubscribe();
  await client.close();
  return { sum, asked, message, sent: [...sent], received: [...received] };
};
window.ready = true;
</script>`;

/** One entry of src/ bundled for the browser, as a page loads it. */
async function browserBundle(entry: string): Promise<string> {
  const bundle = await build({
    entryPoints: [new URL(`../../src/${entry}`, import.meta.url).pathname],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'chrome110',
    write: false,
    logLevel: 'error',
  });
  return bundle.outputFiles[0]!.text;
}

describe.skipIf(missing !== undefined)('the binary client in Chromium', () => {
  let gateway: Gateway;
  let browser: Browser;
  let httpUrl: string;
  /** Per session opened: its subprotocol and the frame types the gateway received on it. */
  const sessions: { protocol: string; frames: Set<string> }[] = [];

  beforeAll(async () => {
    const scripts = new Map<string, string>([
      ['/client.js', await browserBundle('client/index.ts')],
      ['/msgpack.js', await browserBundle('msgpack.ts')],
      ['/cbor.js', await browserBundle('cbor.ts')],
    ]);
    const running = await startGateway({
      encodings: ['json', 'msgpack', 'cbor'],
      httpHandler: (req, res) => {
        const script = scripts.get(req.url ?? '');
        res.writeHead(200, {
          'content-type': `${script ? 'text/javascript' : 'text/html'}; charset=utf-8`,
        });
        res.end(script ?? page);
        return true;
      },
    });
    gateway = running.gateway;
    httpUrl = running.httpUrl;
    gateway.topic('feed');
    gateway.method('add', ([a, b]: [number, number]) => a + b);
    gateway.method('ask', async (_params, ctx) => ctx.session.call('client.name', []));
    gateway.method('publish', async ([data]: [unknown]) => {
      await gateway.publish('feed', data);
      return true;
    });
    gateway.connected$.subscribe((session) => {
      const { socket } = session.transport as WsTransport;
      const seen = { protocol: socket.protocol, frames: new Set<string>() };
      sessions.push(seen);
      socket.on('message', (_data: RawData, isBinary: boolean) =>
        seen.frames.add(isBinary ? 'binary' : 'text'),
      );
    });
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await gateway?.close({ timeoutMs: 1_000 });
  });

  it.each(['msgpack', 'cbor'])(
    '%s: a call, a server-to-client call and a published message, in binary frames both ways',
    async (name) => {
      const tab = await browser.newPage();
      await tab.goto(`${httpUrl}/`);
      await tab.waitForFunction(() => (window as { ready?: boolean }).ready === true);
      const before = sessions.length;
      const result = await tab.evaluate(
        (codec) => (window as unknown as { run(name: string): Promise<unknown> }).run(codec),
        name,
      );
      expect(result).toEqual({
        sum: 42.5,
        asked: `chromium over ${name}`,
        message: { name, text: 'é ✓', list: [1, null, true] },
        sent: ['binary'],
        received: ['binary'],
      });
      expect(sessions.slice(before)).toEqual([
        { protocol: `jsonrpc-2.0+${name}`, frames: new Set(['binary']) },
      ]);
      await tab.close();
    },
    30_000,
  );
});
