// What the gateway logs about routed calls that fail without an upstream's answer: a client can
// make such failures at will (a call past its share, a call to an upstream that is down), so
// none of them may make a log line per call at warn, nor put its whole method name in one.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NOISE_WARN_LIMIT } from '../../src/peer/noise-log.js';
import { MAX_SHOWN_METHOD_CHARS } from '../../src/upstream/install-routes.js';
import { CaptureLogger, logged } from '../support/logging.js';
import type { LogRecord } from '../support/logging.js';
import { Resources } from '../support/resources.js';
import { waitFor } from '../support/waiting.js';
import { clientFrom, expectUpstreamBusy, startHeldUpstream } from './held-upstream.js';
import type { HeldUpstream, LoopbackClient } from './held-upstream.js';
import { startRoutedGateway } from './routed-gateway.js';
import type { RoutedGateway } from './routed-gateway.js';

const FAILED = 'upstream request failed';
/** A method name far longer than a log line should carry. */
const LONG = 'down.' + 'x'.repeat(4_000);

/** An upstream that answers every request 502 without a JSON-RPC body: -32011 for each call. */
async function startDownUpstream(): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(502).end('bad gateway'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/rpc`, server };
}

const logger = new CaptureLogger();
const res = new Resources();
let held: HeldUpstream;
let down: { url: string; server: Server };
let running: RoutedGateway;
let holder: LoopbackClient;
let holding: Promise<unknown>;

beforeAll(async () => {
  held = await startHeldUpstream();
  down = await startDownUpstream();
  running = await startRoutedGateway(
    {
      // One call in flight at most: while the holder's call is held, every other one is refused.
      upstreams: { held: { url: held.url, maxConcurrent: 1 }, down: { url: down.url } },
      methods: { 'held.*': 'held', 'down.*': 'down' },
    },
    // Connections per run of the model, from few addresses: no connection rate to refuse one.
    { logger, limits: { connectionsPerSecondPerIp: 0 } },
  );
  holder = await clientFrom(new Resources(), running.url, '127.0.0.1');
  holding = holder.request('held.hold');
  await waitFor(() => held.held.length === 1, 'the holder to take the one slot');
});

afterEach(async () => {
  await res.cleanup();
  await waitFor(() => running.gateway.sessions.size === 1, "the test's sessions to close");
  logger.records.splice(0);
});

afterAll(async () => {
  held.release();
  await holding;
  holder.socket.close();
  await running.close();
  await held.stop();
  await new Promise((resolve) => down.server.close(resolve));
});

/** A fresh session of this file's gateway, closed after the test. */
const session = (): Promise<LoopbackClient> => clientFrom(res, running.url, '127.0.0.1');

const warnings = (records: readonly LogRecord[]) => records.filter((r) => r.level === 'warn');

async function busyCount(upstream = 'held'): Promise<number> {
  const text = await running.gateway.metrics.registry.metrics();
  const match = new RegExp(
    `wsrpc_upstream_requests_total\\{upstream="${upstream}",outcome="busy"\\} (\\d+)`,
  ).exec(text);
  return match ? Number(match[1]) : 0;
}

describe('logs of routed calls that fail', () => {
  it('a flood of -32013 refusals logs nothing at warn; each is counted as busy', async () => {
    const before = await busyCount();
    const flood = 60;
    const clients = await Promise.all([session(), session()]);
    for (const client of clients) {
      const replies = await Promise.all(
        Array.from({ length: flood / 2 }, () => client.request('held.' + 'y'.repeat(4_000))),
      );
      for (const reply of replies) expectUpstreamBusy(reply, 'held', 'maxConcurrent', 1);
    }
    expect(warnings(logger.records)).toEqual([]);
    expect(logged(logger.records, FAILED)).toEqual([]);
    expect((await busyCount()) - before).toBe(flood);
  });

  it('other failures: the first NOISE_WARN_LIMIT of a session at warn, the rest at debug, per session', async () => {
    const first = await session();
    const calls = NOISE_WARN_LIMIT + 15;
    for (let i = 0; i < calls; i++) {
      expect((await first.request('down.get')).error).toMatchObject({ code: -32011 });
    }
    const levels = logged(logger.records, FAILED).map((r) => r.level);
    expect(levels).toEqual([
      ...Array<string>(NOISE_WARN_LIMIT).fill('warn'),
      ...Array<string>(calls - NOISE_WARN_LIMIT).fill('debug'),
    ]);
    // The last warn line says the rest go to debug.
    expect(logged(logger.records, FAILED)[NOISE_WARN_LIMIT - 1]!.obj).toMatchObject({
      moreAtDebug: true,
    });
    // Another session has a count of its own.
    const second = await session();
    expect((await second.request('down.get')).error).toMatchObject({ code: -32011 });
    expect(logged(logger.records, FAILED).at(-1)!.level).toBe('warn');
  });

  it('notifications log as calls do: busy nothing, others NOISE_WARN_LIMIT at warn then debug, never again as a failed handler', async () => {
    const [heldBefore, downBefore] = [await busyCount(), await busyCount('down')];
    const client = await session();
    const notify = (method: string): void =>
      client.socket.send(JSON.stringify({ jsonrpc: '2.0', method, params: [] }));
    for (let i = 0; i < 30; i++) notify('held.get');
    // Past the session's share of the upstream, some of these are refused busy too.
    const sent = NOISE_WARN_LIMIT + 15;
    for (let i = 0; i < sent; i++) notify('down.get');
    const failed = () => logged(logger.records, FAILED).length;
    await waitFor(
      async () => failed() + (await busyCount('down')) - downBefore === sent,
      'every notification failed or refused',
    );
    expect((await busyCount()) - heldBefore).toBe(30);
    expect(logged(logger.records, 'notification handler failed')).toEqual([]);
    expect(failed()).toBeGreaterThan(0);
    expect(logged(logger.records, FAILED).map((r) => r.level)).toEqual([
      ...Array<string>(Math.min(failed(), NOISE_WARN_LIMIT)).fill('warn'),
      ...Array<string>(Math.max(0, failed() - NOISE_WARN_LIMIT)).fill('debug'),
    ]);
  });

  it('a long method name is logged cut, with the route and the name length', async () => {
    const client = await session();
    expect((await client.request(LONG)).error).toMatchObject({ code: -32011 });
    const [record] = logged(logger.records, FAILED);
    const fields = record!.obj as Record<string, unknown>;
    expect(fields).toMatchObject({ upstream: 'down', route: 'down.*', methodChars: LONG.length });
    expect(fields['method']).toBe(LONG.slice(0, MAX_SHOWN_METHOD_CHARS));
    expect(JSON.stringify(record).length).toBeLessThan(2 * MAX_SHOWN_METHOD_CHARS + 1_000);
  });

  it('model: over any sequence of refusals and failures across sessions, busy logs nothing and each session has NOISE_WARN_LIMIT warn lines, then debug; each names its method as cut', async () => {
    // A step is a run of calls from one session, so that sessions go past NOISE_WARN_LIMIT
    // failures (at fast-check's default size an array is ~5 steps: a session never did).
    const step = fc.record({
      session: fc.integer({ min: 0, max: 2 }),
      busy: fc.oneof({ weight: 3, arbitrary: fc.constant(false) }, fc.constant(true)),
      method: methodName,
      times: fc.integer({ min: 1, max: 8 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 20, size: 'max' }), async (steps) => {
        const runRes = new Resources();
        try {
          const sessions = await Promise.all(
            [0, 1, 2].map(() => clientFrom(runRes, running.url, '127.0.0.1')),
          );
          logger.records.splice(0);
          // The model: each session's count of failures other than busy.
          const failures = [0, 0, 0];
          const expected: Record<string, unknown>[] = [];
          for (const { session: at, busy, method: name, times } of steps) {
            const method = busy ? name.replace(/^down\./, 'held.') : name;
            for (let i = 0; i < times; i++) {
              const reply = await sessions[at]!.request(method);
              expect(reply.error?.code).toBe(busy ? -32013 : -32011);
              if (busy) continue;
              const count = ++failures[at]!;
              expected.push({
                level: count <= NOISE_WARN_LIMIT ? 'warn' : 'debug',
                count,
                method: shownAs(method),
                ...(count === NOISE_WARN_LIMIT ? { moreAtDebug: true } : {}),
                ...(method.length > MAX_SHOWN_METHOD_CHARS ? { methodChars: method.length } : {}),
              });
            }
          }
          const seen = logged(logger.records, FAILED).map((r) => {
            const fields = r.obj as Record<string, unknown>;
            return {
              level: r.level,
              count: fields['count'],
              method: fields['method'],
              ...('moreAtDebug' in fields ? { moreAtDebug: fields['moreAtDebug'] } : {}),
              ...('methodChars' in fields ? { methodChars: fields['methodChars'] } : {}),
            };
          });
          expect(seen).toEqual(expected);
          expect(warnings(logger.records)).toHaveLength(
            expected.filter((e) => e['level'] === 'warn').length,
          );
        } finally {
          await runRes.cleanup();
          await waitFor(() => running.gateway.sessions.size === 1, "the run's sessions to close");
        }
      }),
      // One example whose names sit at the cut: exactly MAX_SHOWN_METHOD_CHARS, and one past it
      // with an astral character across the cut.
      {
        numRuns: 15,
        examples: [
          [
            [
              { session: 0, busy: false, method: nameOf(MAX_SHOWN_METHOD_CHARS), times: 1 },
              {
                session: 1,
                busy: false,
                method: nameOf(MAX_SHOWN_METHOD_CHARS + 1, MAX_SHOWN_METHOD_CHARS - 1),
                times: 1,
              },
            ],
          ],
        ],
      },
    );
  });
});

/**
 * A routed name (`down.`...) `length` UTF-16 units long, with an astral character (a surrogate
 * pair) from `pairAt` when given and it fits.
 */
function nameOf(length: number, pairAt?: number): string {
  const name = 'down.' + 'x'.repeat(length - 'down.'.length);
  if (pairAt === undefined || pairAt + 2 > length) return name;
  return name.slice(0, pairAt) + '\u{1F600}' + name.slice(pairAt + 2);
}

/** Method names: a short one, or one about MAX_SHOWN_METHOD_CHARS long or far past it. */
const methodName = fc.oneof(
  { weight: 2, arbitrary: fc.constant('down.get') },
  {
    weight: 3,
    arbitrary: fc
      .record({
        length: fc.oneof(
          fc.integer({ min: MAX_SHOWN_METHOD_CHARS - 2, max: MAX_SHOWN_METHOD_CHARS + 2 }),
          fc.constant(LONG.length),
        ),
        pairAt: fc.option(
          fc.integer({ min: MAX_SHOWN_METHOD_CHARS - 2, max: MAX_SHOWN_METHOD_CHARS }),
          { nil: undefined },
        ),
      })
      .map(({ length, pairAt }) => nameOf(length, pairAt)),
  },
);

/**
 * The model of the logged name: whole up to MAX_SHOWN_METHOD_CHARS; past it, the longest start
 * of it that is no longer and is well-formed (a cut never leaves half a surrogate pair).
 */
function shownAs(method: string): string {
  if (method.length <= MAX_SHOWN_METHOD_CHARS) return method;
  for (let cut = MAX_SHOWN_METHOD_CHARS; ; cut--) {
    const shown = method.slice(0, cut);
    // A start of a well-formed name is well-formed unless it ends in a pair's first half.
    if (!/[\ud800-\udbff]$/.test(shown)) return shown;
  }
}
