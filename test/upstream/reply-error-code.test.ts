// What the reply reader refuses is -32011 Upstream unavailable, logged as the other upstream
// failures are (a session's first NOISE_WARN_LIMIT at warn, then debug), never an internal error
// logged per call: an upstream's error object whose code is an integer JSON-RPC cannot carry
// exactly (1e300, 2^53) is a malformed error object, as one whose code is 1.5.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NOISE_WARN_LIMIT } from '../../src/peer/noise-log.js';
import { JsonRpcError, isWireError } from '../../src/protocol/errors.js';
import { readReply } from '../../src/upstream/read-reply.js';
import { UpstreamError } from '../../src/upstream/index.js';
import { CaptureLogger, logged } from '../support/logging.js';
import { Resources } from '../support/resources.js';
import { clientFrom } from './held-upstream.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

const ID = 7;
const bytes = (text: string) => new TextEncoder().encode(text);

/** How readReply ended on `body`: its result, or what it threw. */
function outcomeOf(body: string): { result: unknown } | { thrown: unknown } {
  try {
    return { result: readReply(bytes(body), ID, 'up') };
  } catch (thrown) {
    return { thrown };
  }
}

/** Codes the wire cannot carry as integers, and codes it can. */
const unsafeCode = fc.oneof(
  fc.constantFrom(1e300, -1e300, 2 ** 53, -(2 ** 53), 1.5, Number.MAX_VALUE),
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Number.isSafeInteger(n)),
  fc.bigInt({ min: 2n ** 53n, max: 2n ** 80n }).map(Number),
);

describe('readReply on an error object', () => {
  it('refuses a reply with both result and error: -32011, not the error passed on', () => {
    for (const result of ['1', 'null', '{}']) {
      const outcome = outcomeOf(
        `{"jsonrpc":"2.0","id":${ID},"result":${result},"error":{"code":1,"message":"m"}}`,
      );
      expect((outcome as { thrown: unknown }).thrown).toBeInstanceOf(UpstreamError);
      expect(outcome).toMatchObject({
        thrown: { code: -32011, reason: 'both "result" and "error"' },
      });
    }
  });

  it('refuses a code that is not a safe integer: -32011 "a malformed error object"', () => {
    fc.assert(
      fc.property(unsafeCode, fc.string(), (code, message) => {
        const body = `{"jsonrpc":"2.0","id":${ID},"error":{"code":${String(code)},"message":${JSON.stringify(message)}}}`;
        const outcome = outcomeOf(body);
        expect(outcome).toHaveProperty('thrown');
        const thrown = (outcome as { thrown: unknown }).thrown;
        expect(thrown).toBeInstanceOf(UpstreamError);
        expect(thrown).toMatchObject({ code: -32011, reason: 'a malformed error object' });
      }),
    );
  });

  it('throws nothing but a result, an UpstreamError or a JsonRpcError the wire carries as it is, whatever the reply', () => {
    const errorObject = fc.record(
      {
        code: fc.oneof(fc.integer(), unsafeCode, fc.jsonValue()),
        message: fc.oneof(fc.string(), fc.jsonValue()),
        data: fc.jsonValue(),
      },
      { requiredKeys: [] },
    );
    const reply = fc.oneof(
      fc.record({ jsonrpc: fc.constant('2.0'), id: fc.constant(ID), error: errorObject }),
      fc.record({ jsonrpc: fc.constant('2.0'), id: fc.constant(ID), result: fc.jsonValue() }),
      fc.jsonValue(),
    );
    fc.assert(
      fc.property(reply, (value) => {
        const outcome = outcomeOf(JSON.stringify(value) ?? 'null');
        if ('result' in outcome) return;
        const { thrown } = outcome;
        if (thrown instanceof UpstreamError) expect(thrown.code).toBe(-32011);
        else {
          expect(thrown).toBeInstanceOf(JsonRpcError);
          expect(isWireError(thrown)).toBe(true);
        }
      }),
      { numRuns: 2_000 },
    );
  });
});

/** An upstream that answers every request an error object whose code is 1e300. */
async function startHugeCodeUpstream(): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const { id } = JSON.parse(body) as { id: number };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(`{"jsonrpc":"2.0","id":${id},"error":{"code":1e300,"message":"huge"}}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/rpc`, server };
}

describe('a routed call whose upstream answers an error code of 1e300', () => {
  const logger = new CaptureLogger();
  const res = new Resources();
  let upstream: { url: string; server: Server };
  let running: RoutedGateway;

  beforeAll(async () => {
    upstream = await startHugeCodeUpstream();
    running = await startRoutedGateway(
      { upstreams: { huge: { url: upstream.url } }, methods: { 'huge.*': 'huge' } },
      { logger },
    );
  });

  afterAll(async () => {
    await res.cleanup();
    await running?.close();
    await new Promise((resolve) => upstream?.server.close(resolve));
  });

  it('is -32011, logged as an upstream failure within the noise limit, never as a handler failure', async () => {
    const client = await clientFrom(res, running.url, '127.0.0.1');
    const calls = NOISE_WARN_LIMIT + 5;
    for (let i = 0; i < calls; i++) {
      expect((await client.request('huge.get')).error).toEqual({
        code: -32011,
        message: 'Upstream unavailable',
        data: { upstream: 'huge', reason: 'a malformed error object' },
      });
    }
    expect(logged(logger.records, 'handler failed')).toEqual([]);
    expect(logger.records.filter((r) => r.level === 'error')).toEqual([]);
    expect(logged(logger.records, 'upstream request failed').map((r) => r.level)).toEqual([
      ...Array<string>(NOISE_WARN_LIMIT).fill('warn'),
      ...Array<string>(calls - NOISE_WARN_LIMIT).fill('debug'),
    ]);
  });
});
