/**
 * The bookkeeping under user inboxes, without sockets: the session router holds a user's inbox
 * topic once per node and lets go of it exactly once (even when the hold lands after the user
 * left, or failed and is retried), publishes a user's messages to the inbox with its
 * retention; a new session's held messages are bounded and go plain, or mark where its
 * `$inbox` subscription starts.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/peer/logger.js';
import type { Params } from '../../src/protocol/types.js';
import type { Broker, History, Retention } from '../../src/pubsub/broker.js';
import { SessionInbox, SessionRouter } from '../../src/server/session-router.js';
import type { InboxMessage, RouterInbox } from '../../src/server/session-router.js';

class RecordingBroker implements Broker {
  readonly ready = true;
  readonly published: { topic: string; payload: string; retention: Retention | undefined }[] = [];
  publish(topic: string, payload: string, retention?: Retention): Promise<number> {
    this.published.push({ topic, payload, retention });
    return Promise.resolve(this.published.length);
  }
  subscribe(): Promise<void> {
    return Promise.resolve();
  }
  unsubscribe(): Promise<void> {
    return Promise.resolve();
  }
  history(): Promise<History> {
    return Promise.resolve({ messages: [], lastSeq: 0 });
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const retention: Retention = { maxLength: 5, maxAgeMs: 60_000 };
const local = { notifySession: () => false, notifyUser: () => 0 };

/** A RouterInbox whose holds the test settles by hand. */
function manualInbox() {
  const pending: { topic: string; resolve: () => void; reject: (err: Error) => void }[] = [];
  const released: string[] = [];
  const inbox: RouterInbox = {
    retention,
    hold: (topic) =>
      new Promise<void>((resolve, reject) => pending.push({ topic, resolve, reject })),
    release: (topic) => void released.push(topic),
  };
  return { inbox, pending, released };
}

function message(seq: number): InboxMessage {
  return { seq, epoch: 'e', method: 'msg', params: [seq] };
}

function recordingSession() {
  const notified: { method: string; params: Params | undefined }[] = [];
  return {
    notified,
    session: {
      notifyChecked: (method: string, params: Params | undefined) =>
        void notified.push({ method, params }),
      isClosed: false,
      logger: silentLogger,
    },
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('SessionRouter with user inboxes', () => {
  it('publishes { method, params } to the user inbox topic with its retention, resolving the seq', async () => {
    const broker = new RecordingBroker();
    const router = new SessionRouter(broker, 'n1', local, silentLogger, {
      inbox: manualInbox().inbox,
    });
    expect(await router.notifyUser('alice', 'msg', { a: 1 })).toBe(1);
    expect(broker.published).toEqual([
      { topic: '~inbox.alice', payload: '{"method":"msg","params":{"a":1}}', retention },
    ]);
  });

  it('holds the topic once for all the sessions of a user, and releases it once when the last leaves', async () => {
    const { inbox, pending, released } = manualInbox();
    const router = new SessionRouter(new RecordingBroker(), 'n1', local, silentLogger, { inbox });
    router.userConnected('alice');
    router.userConnected('alice');
    expect(pending.map((p) => p.topic)).toEqual(['~inbox.alice']);
    pending[0]!.resolve();
    expect(await router.listeningFor('alice')).toBe(true);
    router.userDisconnected('alice');
    expect(released).toEqual([]);
    router.userDisconnected('alice');
    expect(released).toEqual(['~inbox.alice']);
  });

  it('a hold that lands after the user left is released then, once', async () => {
    const { inbox, pending, released } = manualInbox();
    const router = new SessionRouter(new RecordingBroker(), 'n1', local, silentLogger, { inbox });
    router.userConnected('bob');
    router.userDisconnected('bob');
    expect(released).toEqual([]);
    // Back before the first hold landed: the new listener has a hold of its own.
    router.userConnected('bob');
    pending[0]!.resolve();
    pending[1]!.resolve();
    await router.listeningFor('bob');
    expect(released).toEqual(['~inbox.bob']);
    router.userDisconnected('bob');
    expect(released).toEqual(['~inbox.bob', '~inbox.bob']);
  });

  it('a failed hold is retried, and never released', async () => {
    vi.useFakeTimers();
    const { inbox, pending, released } = manualInbox();
    const router = new SessionRouter(new RecordingBroker(), 'n1', local, silentLogger, { inbox });
    router.userConnected('carol');
    pending[0]!.reject(new Error('down'));
    expect(await router.listeningFor('carol')).toBe(false);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(pending).toHaveLength(2); // tried again
    pending[1]!.reject(new Error('down'));
    await vi.advanceTimersByTimeAsync(0);
    router.userDisconnected('carol');
    expect(released).toEqual([]);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(pending).toHaveLength(2);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('SessionInbox', () => {
  it('holds at most maxHeld messages for an undecided session, sent plain, in order, at its first other call', () => {
    const { notified, session } = recordingSession();
    const inbox = new SessionInbox(session, 60_000, 3);
    for (let seq = 1; seq <= 5; seq++) inbox.offer(message(seq));
    expect(notified).toEqual([]);
    inbox.firstCall();
    expect(notified.map((n) => n.params)).toEqual([[3], [4], [5]]);
    inbox.offer(message(6));
    expect(notified.map((n) => n.params)).toEqual([[3], [4], [5], [6]]);
    inbox.close();
  });

  it('sends what it held plain once holdMs has passed without a call', async () => {
    vi.useFakeTimers();
    const { notified, session } = recordingSession();
    const inbox = new SessionInbox(session, 2_000, 10);
    inbox.offer(message(1));
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(notified.map((n) => n.params)).toEqual([[1]]);
    expect(inbox.undecided).toBe(false);
    inbox.close();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a $inbox subscribe that asked for its position starts before the first message held; one that resumes keeps its since', () => {
    const { notified, session } = recordingSession();
    const inbox = new SessionInbox(session, 60_000, 10);
    inbox.offer(message(7));
    inbox.offer(message(8));
    inbox.claim();
    inbox.offer(message(9)); // while the subscribe is on its way
    expect(inbox.started({ name: '$inbox', params: undefined, position: true })).toEqual({
      name: '$inbox',
      params: undefined,
      since: 6,
      epoch: undefined,
      position: false,
    });
    // Held until the subscribe is answered: had it failed, the session would have them still.
    expect(inbox.wantsMessages).toBe(true);
    inbox.confirmed();
    expect(inbox.wantsMessages).toBe(false);
    const resumed = new SessionInbox(session, 60_000, 10);
    resumed.offer(message(7));
    resumed.claim();
    const asked = { name: '$inbox', params: undefined, since: 3, epoch: 'e' };
    expect(resumed.started(asked)).toBe(asked);
    expect(notified).toEqual([]);
  });
});
