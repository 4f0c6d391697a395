/**
 * Garbage is not free: responses nobody asked for, malformed responses, invalid messages and
 * parse errors spend the connection's rate-limit tokens, and the warn lines they cause are
 * bounded per session.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, createLogger } from '../../src/index.js';
import { NOISE_WARN_LIMIT } from '../../src/peer/peer.js';
import { Resources } from '../support/resources.js';
import type { WireFrame } from '../support/raw-rpc.js';
import { openRaw } from '../support/sockets.js';

const res = new Resources();
afterEach(() => res.cleanup());

const RATE_LIMITED = { code: ErrorCode.RateLimited, message: 'Rate limit exceeded' };
/** One token per 1 000 s: nothing refills while a test runs. */
const NO_REFILL = 0.001;

interface LogLine {
  level: number;
  msg: string;
  count?: number;
  moreAtDebug?: boolean;
}

/** pino (the gateway's createLogger) writing every line, debug included, into an array. */
function capturedPino() {
  const lines: LogLine[] = [];
  const logger = createLogger(
    { level: 'debug' },
    { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) },
  );
  return { logger, lines };
}

async function sumGateway(options: Parameters<Resources['gateway']>[0] = {}) {
  const running = await res.gateway(options);
  running.gateway.method('sum', (params) => (params as number[]).reduce((a, b) => a + b, 0));
  return running;
}

describe('protocol noise', () => {
  it(`unmatched and malformed responses: the first ${NOISE_WARN_LIMIT} at warn, the rest at debug, counted`, async () => {
    const { logger, lines } = capturedPino();
    const { url } = await sumGateway({ logger, limits: { ratePerSecond: 0 } });
    const raw = await openRaw(res, url);
    const unmatched = 200;
    const malformed = 50;
    for (let i = 1; i <= unmatched; i++) raw.send({ jsonrpc: '2.0', result: i, id: 10_000 + i });
    raw.send(
      Array.from({ length: malformed }, (_, i) => ({ jsonrpc: '2.0', result: 1, error: 1, id: i })),
    );
    await raw.barrier();

    const noise = lines.filter((l) => /matches no pending call|malformed response/.test(l.msg));
    const warn = noise.filter((l) => l.level === 40);
    const debug = noise.filter((l) => l.level === 20);
    expect(warn).toHaveLength(NOISE_WARN_LIMIT);
    expect(warn.at(-1)).toMatchObject({ count: NOISE_WARN_LIMIT, moreAtDebug: true });
    expect(debug).toHaveLength(unmatched + malformed - NOISE_WARN_LIMIT);
    expect(debug.at(-1)!.count).toBe(unmatched + malformed);
    // Nothing was answered but the ping.
    expect(raw.frames).toHaveLength(1);
  });

  it('the budget is per session: another connection gets its own warn lines', async () => {
    const { logger, lines } = capturedPino();
    const { url } = await sumGateway({ logger });
    for (const _ of [1, 2]) {
      const raw = await openRaw(res, url);
      for (let i = 1; i <= 3; i++) raw.send({ jsonrpc: '2.0', result: i, id: 10_000 + i });
      await raw.barrier();
    }
    const warn = lines.filter((l) => l.level === 40 && /matches no pending call/.test(l.msg));
    expect(warn.map((l) => l.count)).toEqual([1, 2, 3, 1, 2, 3]);
  });

  it('invalid messages and parse errors take rate-limit tokens, and are still answered', async () => {
    const { url } = await sumGateway({ limits: { ratePerSecond: NO_REFILL, rateBurst: 4 } });
    const raw = await openRaw(res, url);
    raw.send('{not json');
    raw.send({ jsonrpc: '2.0', id: 'x' }); // no method: -32600
    raw.send([{ foo: 1 }, 7]); // two invalid members
    await raw.until(() => raw.frames.length === 3, 'three error replies');
    expect(raw.frames[0]!.error!.code).toBe(ErrorCode.ParseError);
    expect(raw.frames[1]!.error!.code).toBe(ErrorCode.InvalidRequest);
    const batch = raw.frames[2] as unknown as WireFrame[];
    expect(batch.map((m) => m.error!.code)).toEqual([
      ErrorCode.InvalidRequest,
      ErrorCode.InvalidRequest,
    ]);
    // Four tokens spent on garbage: the first real call is refused.
    expect((await raw.request('sum', [1, 2])).error).toEqual(RATE_LIMITED);
    // Garbage beyond the budget is still answered as the spec requires.
    raw.send({ jsonrpc: '2.0', id: 99 });
    await raw.until(() => raw.frames.some((f) => f.id === 99), 'the reply to id 99');
    expect(raw.frames.find((f) => f.id === 99)!.error!.code).toBe(ErrorCode.InvalidRequest);
  });

  it('responses take rate-limit tokens too', async () => {
    const { url } = await sumGateway({ limits: { ratePerSecond: NO_REFILL, rateBurst: 3 } });
    const raw = await openRaw(res, url);
    raw.send({ jsonrpc: '2.0', result: 1, id: 500 });
    raw.send({ jsonrpc: '2.0', error: { code: 1, message: 'm' }, id: 501 });
    raw.send({ jsonrpc: '2.0', result: 1, error: 1, id: 502 }); // malformed
    expect((await raw.request('sum', [1, 2])).error).toEqual(RATE_LIMITED);
  });
});
