/**
 * gateway.join / gateway.leave of a session on another node wait for that node's answer on the
 * node channel. Only an answer of the shape a node sends settles them (`done` a boolean, or
 * `error` a JSON-RPC error object); anything else on the channel is ignored, and the request
 * still times out after MEMBERSHIP_ANSWER_MS rather than wait for ever.
 */
import { afterEach, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import { JsonRpcError } from '../../src/protocol/errors.js';
import { TimeoutError } from '../../src/protocol/local-errors.js';
import { MEMBERSHIP_ANSWER_MS, Membership } from '../../src/server/membership.js';
import type { MembershipDeps } from '../../src/server/membership.js';

afterEach(() => {
  vi.useRealTimers();
});

function membership() {
  const sent: { node: string; body: { id: string } }[] = [];
  const deps = {
    topics: {} as MembershipDeps<unknown>['topics'],
    sessions: new Map(),
    nodeId: 'here',
    send: (node: string, body: { id: string }) => {
      sent.push({ node, body });
      return Promise.resolve();
    },
    logger: silentLogger,
  } as unknown as MembershipDeps<unknown>;
  return { members: new Membership(deps), sent };
}

const MALFORMED: ((id: string) => unknown)[] = [
  (id) => ({ t: 'done', id }),
  (id) => ({ t: 'done', id, error: null }),
  (id) => ({ t: 'done', id, error: { code: 'x', message: 'm' } }),
  (id) => ({ t: 'done', id, done: 'yes' }),
];

it('an answer of no known shape settles nothing; the request times out', async () => {
  vi.useFakeTimers();
  const { members, sent } = membership();
  for (const malformed of MALFORMED) {
    const outcome = members.joinById('there-abc', 'room').then(
      (done) => done,
      (err: unknown) => err,
    );
    const { id } = sent.at(-1)!.body;
    expect(() => members.receive(malformed(id))).not.toThrow();
    await vi.advanceTimersByTimeAsync(MEMBERSHIP_ANSWER_MS);
    expect(await outcome).toBeInstanceOf(TimeoutError);
  }
});

it('a done or an error object settles the request', async () => {
  const { members, sent } = membership();
  const joined = members.joinById('there-abc', 'room');
  members.receive({ t: 'done', id: sent.at(-1)!.body.id, done: true });
  expect(await joined).toBe(true);
  const refused = members.leaveById('there-abc', 'room');
  members.receive({
    t: 'done',
    id: sent.at(-1)!.body.id,
    error: { code: -32004, message: 'Forbidden' },
  });
  await expect(refused).rejects.toEqual(new JsonRpcError(-32004, 'Forbidden'));
});
