// A gateway with the HTTP streaming route and a `held` method the test answers, for the SSE
// client tests whose replies must be sent while a stream is cut, refused or silent.
import { deferred } from '../support/promises.js';
import type { Deferred } from '../support/promises.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';

export interface HeldCallsGateway {
  running: RunningGateway;
  /** One per `held` call, in order: resolving one answers that call. */
  answers: Deferred<string>[];
}

/** Start it on `/rpc/events`; `cleanups` closes it. */
export async function heldCallsGateway(cleanups: (() => unknown)[]): Promise<HeldCallsGateway> {
  const running = await startGateway({ routes: { events: '/rpc/events' } });
  cleanups.push(() => running.gateway.close({ timeoutMs: 1_000 }));
  const answers: Deferred<string>[] = [];
  running.gateway.method('held', () => {
    const answer = deferred<string>();
    answers.push(answer);
    return answer.promise;
  });
  return { running, answers };
}
