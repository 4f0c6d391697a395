/**
 * rpc.discover answers from the document's text, serialised once per document (serveDiscovery):
 * a call costs no JSON.stringify of the document, the reply is the bytes JSON.stringify writes
 * on every JSON transport (WebSocket, HTTP POST, the SSE fallback, NDJSON over TCP), in a batch
 * too, the binary encodings decode it to the document, and the call is charged against the
 * connection's budgets like any other: maxInFlight, the rate limit, the input budget.
 */
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { cbor } from '../../src/cbor.js';
import { msgpack } from '../../src/msgpack.js';
import type { GatewayOptions } from '../../src/server/options.js';
import type { Session } from '../../src/server/session.js';
import { DEFAULT_MESSAGE_COST_BYTES } from '../../src/transport/ws-transport.js';
import type { WsTransport } from '../../src/transport/ws-transport.js';
import { rawBinarySocket } from '../encoding/raw-binary-socket.js';
import { openStream, post } from '../sse/sse-raw.js';
import { newSession, sessionIds } from '../support/gateway.js';
import { sampleValue, scrape } from '../support/metrics.js';
import { deferred } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { openSocket } from '../support/sockets.js';
import { waitUntil, within } from '../support/waiting.js';

const res = new Resources();
afterEach(() => res.cleanup());

/** A document with what JSON.stringify writes its own way: escapes, -0, 1e21, a Date, undefined. */
function trickyDocument(title: string): Record<string, unknown> {
  return {
    openrpc: '1.3.2',
    info: {
      title,
      version: '1.0.0',
      description: 'quote " backslash \\ line\u2028sep </script> é 😀',
    },
    methods: [
      {
        name: 'add',
        params: [{ name: 'a', schema: { type: 'number', minimum: -0, maximum: 1e21 } }],
        result: { name: 'sum', schema: { type: 'number' } },
        skipped: undefined,
      },
    ],
    'x-generated': new Date(Date.UTC(2024, 0, 2, 3, 4, 5)),
    'x-nested': [[[{ deep: [null, true, false, 0.1] }]]],
  };
}

/** A document whose title is read, and counted, each time it is serialised. */
function countedDocument(): { document: unknown; reads: { count: number } } {
  const reads = { count: 0 };
  const document = {
    openrpc: '1.3.2',
    info: {
      version: '1.0.0',
      get title(): string {
        reads.count++;
        return 'counted';
      },
    },
    methods: [],
  };
  return { document, reads };
}

const discoverCall = (id: number | string): string =>
  JSON.stringify({ jsonrpc: '2.0', method: 'rpc.discover', id });

/** The reply to rpc.discover `id`, as encodeSuccess writes it for the document's JSON text. */
const expectedReply = (document: unknown, id: number | string): string =>
  `{"jsonrpc":"2.0","result":${JSON.stringify(document)},"id":${JSON.stringify(id)}}`;

async function discoveryGateway(options: GatewayOptions<unknown> = {}) {
  const running = await res.gateway({ routes: { events: '/rpc/events' }, ...options });
  return running;
}

/** Every text frame a WebSocket receives, in order; resolves `next()` one at a time. */
async function textSocket(url: string) {
  const socket = await openSocket(res, url);
  const frames: string[] = [];
  socket.on('message', (data) => frames.push((data as Buffer).toString('utf8')));
  return {
    socket,
    frames,
    async ask(text: string): Promise<string> {
      const before = frames.length;
      socket.send(text);
      await waitUntil(() => frames.length > before, 'a reply');
      return frames[before]!;
    },
  };
}

function postText(url: string, body: string): Promise<string> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  }).then((response) => response.text());
}

/** Lines written to one NDJSON (TCP) connection, answered one line each. */
async function ndjsonConnection(port: number) {
  const socket = connect(port, '127.0.0.1');
  res.netSockets.push(socket);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const lines: string[] = [];
  let partial = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop()!;
    lines.push(...parts);
  });
  return {
    async ask(text: string): Promise<string> {
      const before = lines.length;
      socket.write(`${text}\n`);
      await waitUntil(() => lines.length > before, 'a reply line');
      return lines[before]!;
    },
  };
}

describe('rpc.discover answers from the text serialised once', () => {
  it('serialises the document once, however many times it is asked for', async () => {
    const { gateway, url, httpUrl } = await discoveryGateway();
    const { document, reads } = countedDocument();
    gateway.serveDiscovery(document);
    expect(reads.count).toBe(1);
    const text = JSON.stringify(document);
    const served = reads.count;
    const reply = (id: number): string => `{"jsonrpc":"2.0","result":${text},"id":${id}}`;

    const ws = await textSocket(url);
    for (let id = 1; id <= 5; id++) expect(await ws.ask(discoverCall(id))).toBe(reply(id));
    expect(await ws.ask(`[${discoverCall(6)},${discoverCall(7)}]`)).toBe(
      `[${reply(6)},${reply(7)}]`,
    );
    expect(await postText(`${httpUrl}/rpc`, discoverCall(8))).toBe(reply(8));
    expect(await (await fetch(`${httpUrl}/openrpc.json`)).text()).toBe(text);
    expect(reads.count).toBe(served);
  });

  it('follows the document given last: serveDiscovery again replaces what both routes answer', async () => {
    const { gateway, url, httpUrl } = await discoveryGateway();
    const first = trickyDocument('first');
    const second = trickyDocument('second');
    const ws = await textSocket(url);
    gateway.serveDiscovery(first);
    expect(await ws.ask(discoverCall(1))).toBe(expectedReply(first, 1));
    gateway.serveDiscovery(second);
    expect(await ws.ask(discoverCall(2))).toBe(expectedReply(second, 2));
    expect(await postText(`${httpUrl}/rpc`, discoverCall(3))).toBe(expectedReply(second, 3));
    expect(await (await fetch(`${httpUrl}/openrpc.json`)).text()).toBe(JSON.stringify(second));
  });

  it('refuses a document JSON.stringify cannot write with its TypeError, and the one given before stays', async () => {
    const { gateway, url, httpUrl } = await discoveryGateway();
    const served = trickyDocument('served');
    gateway.serveDiscovery(served);
    const cyclic: Record<string, unknown> = { openrpc: '1.3.2' };
    cyclic['self'] = cyclic;
    expect(() => gateway.serveDiscovery(cyclic)).toThrow(TypeError);
    expect(() => gateway.serveDiscovery({ big: 1n })).toThrow(TypeError);
    const ws = await textSocket(url);
    expect(await ws.ask(discoverCall(1))).toBe(expectedReply(served, 1));
    expect(await (await fetch(`${httpUrl}/openrpc.json`)).text()).toBe(JSON.stringify(served));
  });

  it('answers what the document was when it was given: rpc.discover and GET agree after it is changed', async () => {
    const { gateway, url, httpUrl } = await discoveryGateway();
    const document = trickyDocument('given');
    const given = JSON.stringify(document);
    gateway.serveDiscovery(document);
    (document['info'] as { title: string }).title = 'changed afterwards';
    const ws = await textSocket(url);
    expect(await ws.ask(discoverCall(1))).toBe(`{"jsonrpc":"2.0","result":${given},"id":1}`);
    expect(await (await fetch(`${httpUrl}/openrpc.json`)).text()).toBe(given);
  });

  it('writes the bytes JSON.stringify writes, alone and in a batch, on every JSON transport', async () => {
    const { gateway, url, httpUrl } = await discoveryGateway();
    const tcp = await gateway.listenTcp(0, '127.0.0.1');
    const document = trickyDocument('bytes');
    gateway.serveDiscovery(document);
    const single = expectedReply(document, 'a');
    const batchText = `[${discoverCall('a')},{"jsonrpc":"2.0","method":"rpc.ping","id":2},${discoverCall(3)}]`;
    const batch = `[${single},{"jsonrpc":"2.0","result":"pong","id":2},${expectedReply(document, 3)}]`;
    const answers: Record<string, (text: string) => Promise<string>> = {};

    const ws = await textSocket(url);
    answers['WebSocket'] = (text) => ws.ask(text);
    answers['HTTP POST'] = (text) => postText(`${httpUrl}/rpc`, text);
    const ndjson = await ndjsonConnection(tcp.port);
    answers['NDJSON over TCP'] = (text) => ndjson.ask(text);
    const events = `${httpUrl}/rpc/events`;
    const stream = await openStream(events);
    res.netSockets.push(stream.response.socket);
    answers['SSE'] = async (text) => {
      const before = stream.events.length;
      expect((await post(events, stream.session, text)).status).toBe(202);
      const all = await stream.until((e) => e.length > before);
      return all[before]!.data;
    };

    for (const [transport, ask] of Object.entries(answers)) {
      expect(await ask(discoverCall('a')), transport).toBe(single);
      expect(await ask(batchText), transport).toBe(batch);
    }
  });

  it('writes the id as the caller wrote it, and JSON-RPC 1.0 replies in their shape', async () => {
    const { gateway, url } = await discoveryGateway({ acceptV1: true });
    const document = trickyDocument('ids');
    gateway.serveDiscovery(document);
    const text = JSON.stringify(document);
    const ws = await textSocket(url);
    expect(await ws.ask('{"jsonrpc":"2.0","method":"rpc.discover","id":1.50}')).toBe(
      `{"jsonrpc":"2.0","result":${text},"id":1.50}`,
    );
    expect(await ws.ask('{"method":"rpc.discover","params":[],"id":7}')).toBe(
      `{"result":${text},"error":null,"id":7}`,
    );
  });

  it('answers null for a document JSON.stringify writes as nothing, as a handler returning it would', async () => {
    const { gateway, url } = await discoveryGateway();
    gateway.serveDiscovery(undefined);
    const ws = await textSocket(url);
    expect(await ws.ask(discoverCall(1))).toBe('{"jsonrpc":"2.0","result":null,"id":1}');
  });

  describe.each([msgpack, cbor])('over $name', (codec) => {
    it('decodes to the document, alone and in a batch', async () => {
      const { gateway, url } = await discoveryGateway({ encodings: ['json', 'msgpack', 'cbor'] });
      const document = trickyDocument(codec.name);
      gateway.serveDiscovery(document);
      const plain = JSON.parse(JSON.stringify(document)) as unknown;
      const raw = await rawBinarySocket(res, url, [codec.subprotocol], codec.decode);
      raw.socket.send(codec.encode({ jsonrpc: '2.0', id: 1, method: 'rpc.discover' }));
      expect(await raw.next()).toMatchObject({
        binary: true,
        value: { jsonrpc: '2.0', id: 1, result: plain },
      });
      raw.socket.send(
        codec.encode([
          { jsonrpc: '2.0', id: 2, method: 'rpc.discover' },
          { jsonrpc: '2.0', id: 3, method: 'rpc.ping' },
        ]),
      );
      expect((await raw.next()).value).toStrictEqual([
        { jsonrpc: '2.0', id: 2, result: plain },
        { jsonrpc: '2.0', id: 3, result: 'pong' },
      ]);
    });
  });
});

describe("rpc.discover is charged against the connection's budgets like any call", () => {
  it('is refused -32000 {maxInFlight} while maxInFlight calls run', async () => {
    const { gateway, url, httpUrl } = await discoveryGateway({ limits: { maxInFlight: 1 } });
    gateway.serveDiscovery(trickyDocument('busy'));
    const release = deferred();
    gateway.method('hold', () => release.promise.then(() => 'done'));
    const ws = await textSocket(url);
    ws.socket.send('{"jsonrpc":"2.0","method":"hold","id":"h"}');
    expect(JSON.parse(await ws.ask(discoverCall(1)))).toStrictEqual({
      jsonrpc: '2.0',
      id: 1,
      error: { code: -32000, message: 'Server busy', data: { maxInFlight: 1 } },
    });
    release.resolve();
    await waitUntil(() => ws.frames.length === 2, 'the held call to end');
    expect(JSON.parse(ws.frames[1]!)).toStrictEqual({ jsonrpc: '2.0', id: 'h', result: 'done' });
    expect(JSON.parse(await ws.ask(discoverCall(2)))).toHaveProperty('result');
    // Counted as every call is (the gateway's own methods under their names): one answered, one
    // refused; `hold` answered too.
    const metrics = await scrape(httpUrl);
    const calls = (method: string, outcome: string) =>
      sampleValue(metrics, 'rpc_calls_total', { method, outcome });
    expect([
      calls('rpc.discover', 'ok'),
      calls('rpc.discover', 'rejected'),
      calls('hold', 'ok'),
    ]).toEqual([1, 1, 1]);
  });

  it('takes a rate token: past the burst it is refused -32003', async () => {
    // One token in 1 000 s: none comes back while the test runs.
    const limits = { ratePerSecond: 0.001, rateBurst: 2 };
    const { gateway, url } = await discoveryGateway({ limits });
    gateway.serveDiscovery(trickyDocument('rate'));
    const ws = await textSocket(url);
    expect(JSON.parse(await ws.ask(discoverCall(1)))).toHaveProperty('result');
    expect(JSON.parse(await ws.ask(discoverCall(2)))).toHaveProperty('result');
    expect(JSON.parse(await ws.ask(discoverCall(3)))).toMatchObject({
      id: 3,
      error: { code: -32003 },
    });
  });

  it('costs the input budget what its frame costs: the burst pays for burst / floor of them', async () => {
    const maxMessageBytes = 1024;
    const atFloor = (2 * maxMessageBytes) / DEFAULT_MESSAGE_COST_BYTES;
    const { gateway, url } = await discoveryGateway({
      // Refills nothing that matters while the test runs: no timing in the count.
      limits: { maxMessageBytes, bytesPerSecond: 1, bytesPerSecondPerIp: 0 },
    });
    gateway.serveDiscovery(trickyDocument('input'));
    const before = sessionIds(gateway);
    const socket = await openSocket(res, url);
    const replies: string[] = [];
    socket.on('message', (data) => replies.push((data as Buffer).toString('utf8')));
    const session: Session = newSession(gateway, before);
    const transport = session.transport as WsTransport;
    // Each call is well under the floor: each costs the floor.
    expect(Buffer.byteLength(discoverCall(999))).toBeLessThan(DEFAULT_MESSAGE_COST_BYTES);
    for (let id = 1; id <= 3 * atFloor; id++) socket.send(discoverCall(id));
    await waitUntil(() => transport.inputPaused, 'reading to pause');
    await within(
      waitUntil(() => replies.length === atFloor, 'the answers to what was read'),
      'the answers',
    );
    expect(transport.inputPaused).toBe(true);
    expect(replies.length).toBe(atFloor);
    for (const reply of replies) expect(JSON.parse(reply)).toHaveProperty('result');
  });
});
