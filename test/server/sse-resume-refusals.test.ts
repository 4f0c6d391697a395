/**
 * A resume of an HTTP streaming session's event stream that is refused counts in
 * rpc_rejected_upgrades_total, by what refused it: `resume-rate` (429, past the session's
 * resume rate), `resume-bad-id` (400, a Last-Event-ID that is no event id), `resume-expired`
 * (the events after that id are no longer held: the session closes 1008), `resume-unknown` (404,
 * no such session or a wrong secret). A resume taken counts nowhere.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { sampleValue, scrape } from '../support/metrics.js';
import { startGateway } from '../support/gateway.js';
import type { GatewayOptions } from '../../src/index.js';
import { waitUntil } from '../support/waiting.js';
import { openStream, post, resumeHeaders } from '../sse/sse-raw.js';
import type { RawStream } from '../sse/sse-raw.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const REASONS = ['resume-rate', 'resume-bad-id', 'resume-expired', 'resume-unknown'] as const;
type Reason = (typeof REASONS)[number];

async function sseGateway(options: GatewayOptions<unknown> = {}) {
  const running = await startGateway({
    routes: { events: '/rpc/events' },
    ...options,
    // Every scrape renders: the counts are read before and after the requests. The property
    // opens streams and scrapes from one address many times a second: no rate refuses them.
    limits: {
      metricsCacheMs: 0,
      connectionsPerSecondPerIp: 0,
      probeRequestsPerSecondPerIp: 0,
      ...options.limits,
    },
  });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  const events = `${running.httpUrl}/rpc/events`;
  const open = async (headers?: Record<string, string>): Promise<RawStream> => {
    const stream = await openStream(events, { headers });
    cleanups.push(() => stream.destroy());
    return stream;
  };
  /** The resume refusals counted so far, by reason (0 for a reason not counted yet). */
  const refused = async (): Promise<Record<Reason, number>> => {
    const text = await scrape(running.httpUrl);
    const counts = {} as Record<Reason, number>;
    for (const reason of REASONS) {
      counts[reason] = sampleValue(text, 'rpc_rejected_upgrades_total', { reason }) ?? 0;
    }
    return counts;
  };
  return { ...running, events, open, refused };
}

const none: Record<Reason, number> = {
  'resume-rate': 0,
  'resume-bad-id': 0,
  'resume-expired': 0,
  'resume-unknown': 0,
};

describe('a refused resume of an event stream in rpc_rejected_upgrades_total', () => {
  it('counts each 429 past the resume rate as resume-rate, and the resumes taken nowhere', async () => {
    const { open, refused } = await sseGateway();
    const first = await open();
    const statuses: number[] = [];
    // Resume until the gateway refuses a few (10 at once, then 1 a second).
    while (statuses.filter((status) => status === 429).length < 3) {
      expect(statuses.length).toBeLessThan(100);
      const resumed = await open(resumeHeaders(first.session, 0));
      statuses.push(resumed.status);
    }
    expect(statuses.filter((status) => status !== 429 && status !== 200)).toEqual([]);
    expect(await refused()).toEqual({ ...none, 'resume-rate': 3 });
  });

  it('counts a Last-Event-ID that is no integer as resume-bad-id (400)', async () => {
    const { open, refused } = await sseGateway();
    const first = await open();
    for (const id of ['abc', '1.5', '9007199254740993']) {
      const resumed = await open(resumeHeaders(first.session, id));
      expect(resumed.status).toBe(400);
    }
    expect(await refused()).toEqual({ ...none, 'resume-bad-id': 3 });
  });

  it('counts a Last-Event-ID no event has (negative, or past the last sent) as resume-bad-id (400), the session kept', async () => {
    const { gateway, events, open, refused } = await sseGateway();
    gateway.method('echo', (params) => params);
    const first = await open();
    const echo = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'echo', params: [1] });
    expect((await post(events, first.session, echo)).status).toBe(202);
    await first.until((all) => all.some((event) => event.id === '1'));
    for (const id of [-1, 2, 2 ** 53 - 1]) {
      const resumed = await open(resumeHeaders(first.session, id));
      expect(resumed.status).toBe(400);
    }
    expect(await refused()).toEqual({ ...none, 'resume-bad-id': 3 });
    // The session and its stream are as they were: a resume from the last event is taken.
    expect(gateway.sessions.size).toBe(1);
    expect((await open(resumeHeaders(first.session, 1))).status).toBe(200);
  });

  it('counts a resume from before what the replay buffer holds as resume-expired', async () => {
    const { gateway, events, open, refused } = await sseGateway({
      limits: { sseReplayBytes: 200 },
    });
    gateway.topic('feed');
    const first = await open();
    const subscribe = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'subscribe',
      params: ['feed'],
    });
    expect((await post(events, first.session, subscribe)).status).toBe(202);
    await first.until((all) => all.some((event) => event.id === '1'));
    first.destroy();
    for (let n = 1; n <= 10; n++) await gateway.publish('feed', 'x'.repeat(50));
    const second = await open(resumeHeaders(first.session, 1));
    await second.until((all) => all.some((event) => event.event === 'close'));
    await waitUntil(() => gateway.sessions.size === 0, 'the session closed');
    expect(await refused()).toEqual({ ...none, 'resume-expired': 1 });
  });

  it('counts a resume of no session, or with a wrong secret, as resume-unknown (404)', async () => {
    const { open, refused } = await sseGateway();
    const first = await open();
    const wrongSecret = await open(resumeHeaders({ ...first.session, secret: 'wrong' }, 0));
    const noSession = await open(resumeHeaders({ session: 'none', secret: 'none' }, 0));
    expect([wrongSecret.status, noSession.status]).toEqual([404, 404]);
    expect(await refused()).toEqual({ ...none, 'resume-unknown': 2 });
  });

  it('counts nothing for resumes taken', async () => {
    const { open, refused } = await sseGateway();
    const first = await open();
    for (let n = 0; n < 3; n++) {
      expect((await open(resumeHeaders(first.session, 0))).status).toBe(200);
    }
    expect(await refused()).toEqual(none);
  });

  it('for any sequence of resumes, each refusal counts once, under the reason its answer says', async () => {
    const { open, refused } = await sseGateway({ limits: { connectionsPerSecondPerIp: 0 } });
    type Kind = 'taken' | 'bad-id' | 'wrong-secret' | 'no-secret';
    const headersFor = (kind: Kind, session: RawStream['session']): Record<string, string> => {
      if (kind === 'taken') return resumeHeaders(session, 0);
      if (kind === 'bad-id') return resumeHeaders(session, 'x');
      if (kind === 'wrong-secret') return resumeHeaders({ ...session, secret: 'wrong' }, 0);
      return { 'x-wsrpc-session': session.session };
    };
    const reasonOf = (kind: Kind, status: number): Reason | undefined => {
      if (status === 200) return undefined;
      if (status === 429) return 'resume-rate';
      return kind === 'bad-id' ? 'resume-bad-id' : 'resume-unknown';
    };
    const kinds = fc.constantFrom<Kind>('taken', 'bad-id', 'wrong-secret', 'no-secret');
    await fc.assert(
      fc.asyncProperty(fc.array(kinds, { minLength: 1, maxLength: 16 }), async (sequence) => {
        const before = await refused();
        const first = await open();
        const wanted = { ...before };
        for (const kind of sequence) {
          const resumed = await open(headersFor(kind, first.session));
          const allowed = kind === 'taken' ? [200, 429] : kind === 'bad-id' ? [400] : [404, 400];
          expect(allowed).toContain(resumed.status);
          const reason = reasonOf(kind, resumed.status);
          if (reason !== undefined) wanted[reason]++;
          resumed.destroy();
        }
        first.destroy();
        expect(await refused()).toEqual(wanted);
      }),
      { numRuns: 20 },
    );
  });
});
