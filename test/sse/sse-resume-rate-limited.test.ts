/**
 * A stream that flaps faster than the gateway lets a session resume (10 at once, then 1/s) is
 * refused 429 with Retry-After: the client waits that out and resumes again from the same
 * Last-Event-ID, so the session goes on and what was sent meanwhile is replayed. The client
 * paces its own resumes after streams cut short (resumeDelay), which keeps it under that rate:
 * here those waits are ended at once, so the stream flaps as fast as a client without them
 * would; the 429's Retry-After is waited out for real.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { RpcClient } from '../../src/client/client.js';
import { SseSocket, sseSocket } from '../../src/client/sse-transport.js';
import { waitUntil, within } from '../support/waiting.js';
import { outcome } from './move-up.js';
import { heldCallsGateway } from './held-calls-gateway.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface StreamTransport {
  lastEventId: number;
  stream?: { destroy(): void };
}

interface Resume {
  lastEventId: string | undefined;
  status: number | 'failed';
}

/** The global fetch, with each resume's Last-Event-ID and the status it was answered. */
function observingFetch() {
  const resumes: Resume[] = [];
  const observed = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const headers = (init?.headers ?? {}) as Record<string, string>;
    const resuming = (init?.method ?? 'GET') === 'GET' && headers['x-wsrpc-session'] !== undefined;
    if (!resuming) return fetch(input, init);
    const resume: Resume = { lastEventId: headers['last-event-id'], status: 'failed' };
    resumes.push(resume);
    const res = await fetch(input, init);
    resume.status = res.status;
    return res;
  };
  return { fetch: observed as typeof fetch, resumes };
}

describe('HTTP streaming fallback (client): a resume refused 429', () => {
  it('waits out Retry-After and resumes from the same id; the session and its reply survive', async () => {
    const { running, answers } = await heldCallsGateway(cleanups);
    running.gateway.method('add', ([a, b]: [number, number]) => a + b);
    const observing = observingFetch();
    // Only a refusal's wait is waited: the pacing of resumes after short streams is taken out.
    const proto = SseSocket.prototype as unknown as { sleep(ms: number): Promise<void> };
    const sleep = proto.sleep; // eslint-disable-line @typescript-eslint/unbound-method
    vi.spyOn(proto, 'sleep').mockImplementation(function (this: unknown, ms) {
      const refusal = observing.resumes.at(-1)?.status === 429;
      return sleep.call(this, refusal ? ms : 0);
    });
    const rpc = new RpcClient({
      url: running.url,
      WebSocket: sseSocket({ fetch: observing.fetch }),
      reconnect: false,
      heartbeat: false,
    });
    cleanups.push(() => rpc.close());
    await rpc.opened();
    const sessions = () => [...running.gateway.sessions.values()];
    const [session] = sessions();
    const transport = () => session!.transport as unknown as StreamTransport;
    expect(await rpc.call('add', [1, 2])).toBe(3); // event 1, read
    const call = outcome(rpc.call('held'));
    await waitUntil(() => answers.length === 1, 'the call to reach the server');

    // Drop the stream as each resume attaches, until the gateway refuses one.
    const refused = () => observing.resumes.some((resume) => resume.status === 429);
    for (let drops = 0; !refused(); drops++) {
      expect(drops).toBeLessThan(100);
      const stream = transport().stream;
      stream?.destroy();
      await waitUntil(
        () => refused() || (transport().stream !== undefined && transport().stream !== stream),
        'the next resume',
      );
    }
    answers[0]!.resolve('answered'); // sent while the stream is away: replayed on the resume

    expect(await within(call, 'the reply, replayed')).toBe('resolved answered');
    expect(sessions()).toEqual([session]);
    const at = observing.resumes.findIndex((resume) => resume.status === 429);
    const after = observing.resumes.slice(at);
    expect(after.map((resume) => resume.lastEventId)).toEqual(after.map(() => '1'));
    expect(after.at(-1)!.status).toBe(200);
    expect(await rpc.call('add', [2, 3])).toBe(5);
  });
});
