/**
 * Reading the deny list again when the broker link is back (Revocations.recheck), against a
 * model, over random sequences of: sessions opening (as the deny check lets them), revocations
 * received (closeLocal) or lost with the link down (only the deny list has them), reads that
 * fail, and returns of the link. After a return whose reads all succeeded, no session of a
 * listed user with credentials issued before its revocation is open; no other session is ever
 * closed; a return whose reads failed for a user here says so (false) and closes nothing of
 * that user's. Plus the router's side: returns of the link during a run are one more run, a run
 * that could not read everything is run again.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Broker } from '../../src/pubsub/broker.js';
import type { Denial } from '../../src/pubsub/deny-list.js';
import { Revocations } from '../../src/server/revocation.js';
import { SessionRouter } from '../../src/server/session-router.js';
import type { Session } from '../../src/server/session.js';
import { fakeSession } from '../support/fake-sessions.js';
import type { FakeSession } from '../support/fake-sessions.js';
import { captureLogger } from '../support/logging.js';
import { deferred } from '../support/promises.js';
import type { Deferred } from '../support/promises.js';
import { waitUntil } from '../support/waiting.js';

interface Identity {
  user: string;
  issuedAt: number;
}

interface Real {
  revocations: Revocations<Identity>;
  sessions: FakeSession<Identity>[];
  list: Map<string, Denial>;
  failing: Set<string>;
}

interface Model {
  clock: number;
  /** Revocation time by user (the newest). */
  listed: Map<string, number>;
  /** Open sessions: id -> identity. */
  open: Map<string, Identity>;
  failing: Set<string>;
  next: number;
}

const USERS = ['ann', 'bob', 'cat'] as const;

const revokedBefore = (model: Model, identity: Identity): boolean => {
  const at = model.listed.get(identity.user);
  return at !== undefined && identity.issuedAt <= at;
};

function openIds(real: Real): string[] {
  return real.sessions
    .filter((s) => !s.isClosed)
    .map((s) => s.id)
    .sort();
}

type Command = fc.AsyncCommand<Model, Real>;

/** A session of `user` with credentials issued `age` ticks before now; refused if listed for them. */
const openCommand = (user: string, age: number): Command => ({
  check: () => true,
  run(model, real) {
    const identity = { user, issuedAt: model.clock - age };
    // The deny check would refuse it: it never opens.
    if (revokedBefore(model, identity)) return Promise.resolve();
    const id = `s${model.next++}`;
    model.open.set(id, identity);
    real.sessions.push(fakeSession(id, user, identity));
    return Promise.resolve();
  },
  toString: () => `open(${user}, -${age})`,
});

/** Revoke `user` now: listed; the message reaches this node (`received`) or is lost. */
const revokeCommand = (user: string, received: boolean): Command => ({
  check: () => true,
  run(model, real) {
    const revokedAt = ++model.clock;
    model.listed.set(user, revokedAt);
    real.list.set(user, { revokedAt, until: Number.MAX_SAFE_INTEGER });
    if (!received) return Promise.resolve();
    real.revocations.closeLocal({ user, reason: 'gone', revokedAt, origin: 'other' });
    for (const [id, identity] of [...model.open]) {
      if (identity.user === user && revokedBefore(model, identity)) model.open.delete(id);
    }
    expect(openIds(real)).toEqual([...model.open.keys()].sort());
    return Promise.resolve();
  },
  toString: () => `revoke(${user}, ${received ? 'received' : 'lost'})`,
});

const failCommand = (users: string[]): Command => ({
  check: () => true,
  run(model, real) {
    model.failing = new Set(users);
    real.failing = new Set(users);
    return Promise.resolve();
  },
  toString: () => `fail reads of [${users.join(',')}]`,
});

/** Time passes: credentials issued from now on are newer than every revocation so far. */
const tickCommand: Command = {
  check: () => true,
  run(model) {
    model.clock++;
    return Promise.resolve();
  },
  toString: () => 'tick',
};

const relinkCommand: Command = {
  check: () => true,
  async run(model, real) {
    const complete = await real.revocations.recheck();
    const here = new Set([...model.open.values()].map((identity) => identity.user));
    expect(complete).toBe(![...model.failing].some((user) => here.has(user)));
    for (const [id, identity] of [...model.open]) {
      if (!model.failing.has(identity.user) && revokedBefore(model, identity)) {
        model.open.delete(id);
      }
    }
    expect(openIds(real)).toEqual([...model.open.keys()].sort());
    for (const session of real.sessions) {
      if (session.closedWith?.reason === 'revoked') expect(session.closedWith.code).toBe(4403);
    }
  },
  toString: () => 'relink',
};

const user = fc.constantFrom(...USERS);
const commands = fc.commands(
  [
    fc.tuple(user, fc.integer({ min: 0, max: 3 })).map(([u, age]) => openCommand(u, age)),
    fc.tuple(user, fc.boolean()).map(([u, received]) => revokeCommand(u, received)),
    fc.subarray([...USERS]).map(failCommand),
    fc.constant(tickCommand),
    fc.constant(relinkCommand),
  ],
  { size: '+1' },
);

function fakeBroker(real: Pick<Real, 'list' | 'failing'>): Broker {
  return {
    ready: true,
    denied: (name: string) =>
      real.failing.has(name)
        ? Promise.reject(new Error('no answer'))
        : Promise.resolve(real.list.get(name)),
    deny: () => Promise.resolve(),
  } as unknown as Broker;
}

describe('reading the deny list again when the broker link is back, against its model', () => {
  it('closes exactly the sessions revoked before their credentials were issued, unless unread', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 4 }), commands, async (batch, cmds) => {
        const real = { sessions: [], list: new Map(), failing: new Set() } as unknown as Real;
        real.revocations = new Revocations<Identity>({
          broker: fakeBroker(real),
          router: {
            revokeUser: () => Promise.resolve(0),
            revokeSession: () => Promise.resolve(false),
          },
          nodeId: 'here',
          logger: captureLogger().logger,
          exposeErrorDetails: false,
          userOf: (context) => context.user,
          issuedAtOf: (context) => context.issuedAt,
          sessions: () => real.sessions as unknown as Session<Identity>[],
          recheckBatch: batch,
        });
        const model: Model = {
          clock: 10,
          listed: new Map(),
          open: new Map(),
          failing: new Set(),
          next: 0,
        };
        await fc.asyncModelRun(() => ({ model, real }), cmds);
      }),
      { numRuns: 300 },
    );
  });
});

describe("the router's runs of `relinked`", () => {
  /** A broker whose link returns on call (`relink`); `subscribe` and the rest do nothing. */
  function relinkingBroker() {
    const listeners = new Set<() => void>();
    const broker = {
      ready: true,
      subscribe: () => Promise.resolve(),
      unsubscribe: () => Promise.resolve(),
      publish: () => Promise.resolve(0),
      onRelinked(listener: () => void) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    } as unknown as Broker;
    return { broker, relink: () => [...listeners].forEach((listener) => listener()) };
  }

  it('one run at a time: returns during a run make one more run after it; none after stop', async () => {
    const { broker, relink } = relinkingBroker();
    const runs: Deferred<boolean>[] = [];
    const router = new SessionRouter(broker, 'n', {} as never, captureLogger().logger, {
      revoked: () => 0,
      relinked: () => {
        const run = deferred<boolean>();
        runs.push(run);
        return run.promise;
      },
    });
    relink(); // not started: nothing
    await router.start();
    expect(runs.length).toBe(0);
    relink();
    relink();
    relink();
    expect(runs.length).toBe(1);
    runs[0]!.resolve(true);
    await waitUntil(() => runs.length === 2, 'the run that follows');
    runs[1]!.resolve(true);
    await router.stop();
    relink();
    expect(runs.length).toBe(2);
  });

  it('a run that could not read everything is run again', async () => {
    const { broker, relink } = relinkingBroker();
    let runs = 0;
    const router = new SessionRouter(broker, 'n', {} as never, captureLogger().logger, {
      revoked: () => 0,
      relinked: () => Promise.resolve(++runs >= 3),
    });
    await router.start();
    relink();
    await waitUntil(() => runs === 3, 'two more runs');
    await router.stop();
  });
});
