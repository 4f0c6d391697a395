/*
 * The client's subscriptions against a gateway that misbehaves or is merely busy, over real
 * sockets (a `ws` server scripted by each test):
 * - subscriptions the server makes (`rpc.joined`) are held up to `maxJoined`; one more is
 *   unsubscribed, never announced, and logged at warn once an interval;
 * - a reconnect resubscribes any number of live subscriptions, in waves that fit the call table
 *   (`maxPendingCalls`) and the server's `maxInFlight`, ahead of the calls queued meanwhile, and
 *   none of them errors for a full table (the client's, or the server's: -32000 Server busy),
 *   joined ones included;
 * - a message of a subscription ended, read before its unsubscribe is answered, never reaches a
 *   later subscription the server gives the same id;
 * - a `gap`, `seq` or `missed` that is not a non-negative safe integer never moves the position
 *   a subscription resumes from, so later messages are not taken for duplicates.
 */
import fc from 'fast-check';
import { firstValueFrom } from 'rxjs';
import { filter } from 'rxjs/operators';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { RpcClient } from '../../src/client/client.js';
import { resolveClientOptions } from '../../src/client/client-options.js';
import { subscriptionStatus$ } from '../../src/client/subscription-status.js';
import { MAX_SUBSCRIBE_WINDOW } from '../../src/client/subscriptions.js';
import type { SubscriptionEvent } from '../../src/client/subscriptions.js';
import {
  decodeSubscriptionNotification,
  isSequenceNumber,
} from '../../src/protocol/subscription-frames.js';
import { gapTail, messageTail, missedPart, positionTail } from '../../src/pubsub/frames.js';
import type { ClientFrame } from '../support/fake-gateway.js';
import { FakeGateways, framesOf, note, reply, send } from '../support/fake-gateway.js';
import { CaptureLogger, logged } from '../support/logging.js';
import { waitFor } from '../support/waiting.js';

const gateways = new FakeGateways({ reconnect: { initialDelayMs: 20, maxDelayMs: 50 } });
const { subscriptions } = gateways;
afterEach(() => gateways.cleanup());

const client = (url: string, options: Record<string, unknown> = {}): RpcClient =>
  gateways.client({ url, ...options });

describe('maxJoined: subscriptions the server makes', () => {
  it('is an option at least 0, default 1 000', () => {
    const base = { url: 'ws://127.0.0.1:1/rpc', WebSocket };
    expect(resolveClientOptions(base).maxJoined).toBe(1000);
    expect(resolveClientOptions({ ...base, maxJoined: 0 }).maxJoined).toBe(0);
    expect(() => resolveClientOptions({ ...base, maxJoined: -1 })).toThrow(RangeError);
    expect(() => resolveClientOptions({ ...base, maxJoined: 1.5 })).toThrow(
      'maxJoined must be an integer at least 0, not 1.5',
    );
  });

  it('holds what the maxJoined option says', async () => {
    const unsubscribed: unknown[] = [];
    const gateway = await gateways.listen((socket) => {
      socket.on('message', (data) => {
        for (const request of framesOf(data)) {
          if (request.method !== 'unsubscribe') continue;
          unsubscribed.push((request.params as unknown[])[0]);
          reply(socket, request.id, true);
        }
      });
    });
    const c = client(gateway.url, { maxJoined: 2 });
    const announced: string[] = [];
    subscriptions.push(c.joined$.subscribe(({ topic }) => announced.push(topic)));
    await c.opened();
    const joins = [0, 1, 2].map((i) => ({
      jsonrpc: '2.0',
      method: 'rpc.joined',
      params: { topic: `t.${i}`, subscription: `s${i}` },
    }));
    gateway.sockets[0]!.send(JSON.stringify(joins));
    await waitFor(
      () => unsubscribed.length === 1,
      () => `${unsubscribed.length} unsubscribed`,
    );
    expect(unsubscribed).toEqual(['s2']);
    expect(announced).toEqual(['t.0', 't.1']);
  });

  it('holds 1 000 at once: more are unsubscribed, not announced, warned of once', async () => {
    const extra = 40;
    const unsubscribed: unknown[] = [];
    const gateway = await gateways.listen((socket) => {
      socket.on('message', (data) => {
        for (const request of framesOf(data)) {
          if (request.method !== 'unsubscribe') continue;
          unsubscribed.push((request.params as unknown[])[0]);
          reply(socket, request.id, true);
        }
      });
    });
    const logger = new CaptureLogger();
    const c = client(gateway.url, { logger });
    const announced: string[] = [];
    subscriptions.push(c.joined$.subscribe(({ topic }) => announced.push(topic)));
    await c.opened();
    const joins = Array.from({ length: 1000 + extra }, (_, i) => ({
      jsonrpc: '2.0',
      method: 'rpc.joined',
      params: { topic: `t.${i}`, subscription: `s${i}` },
    }));
    gateway.sockets[0]!.send(JSON.stringify(joins));
    await waitFor(
      () => unsubscribed.length === extra,
      () => `${unsubscribed.length} unsubscribed`,
    );
    expect(announced).toHaveLength(1000);
    expect(unsubscribed).toEqual(Array.from({ length: extra }, (_, i) => `s${1000 + i}`));
    expect(c.subscriptionOf('t.999')).toBeDefined();
    expect(c.subscriptionOf('t.1000')).toBeUndefined();
    const warned = logger.records.filter((r) => r.level === 'warn');
    expect(warned).toHaveLength(1);
    expect(warned[0]!.obj).toMatchObject({ maxJoined: 1000, refused: 1, topic: 't.1000' });

    // One the server ends makes room for the next.
    note(gateway.sockets[0]!, { subscription: 's0', complete: true });
    gateway.sockets[0]!.send(
      JSON.stringify({
        jsonrpc: '2.0',
        method: 'rpc.joined',
        params: { topic: 'again', subscription: 'a1' },
      }),
    );
    await waitFor(() => announced.length === 1001, 'the join after one ended');
    expect(announced.at(-1)).toBe('again');
  });
  it('unsubscribes of refused joins in flight are bounded by the subscribes’ window', async () => {
    const unsubscribed: unknown[] = [];
    const gateway = await gateways.listen((socket) => {
      socket.on('message', (data) => {
        // Never answered: each holds a slot of the client's call table.
        for (const request of framesOf(data)) {
          if (request.method === 'unsubscribe') unsubscribed.push((request.params as unknown[])[0]);
        }
      });
    });
    const c = client(gateway.url, { callTimeoutMs: 0 });
    const done = new Promise((resolve) => c.notificationsOf('done').subscribe(resolve));
    await c.opened();
    const joins = Array.from({ length: 1000 + 2000 }, (_, i) => ({
      jsonrpc: '2.0',
      method: 'rpc.joined',
      params: { topic: `t.${i}`, subscription: `s${i}` },
    }));
    gateway.sockets[0]!.send(JSON.stringify(joins));
    gateway.sockets[0]!.send(JSON.stringify({ jsonrpc: '2.0', method: 'done' }));
    await done;
    await waitFor(
      () => unsubscribed.length >= MAX_SUBSCRIBE_WINDOW,
      () => `${unsubscribed.length} unsubscribed`,
    );
    expect(unsubscribed).toHaveLength(MAX_SUBSCRIBE_WINDOW);
  });
});

describe('resubscribing more subscriptions than the call table holds', () => {
  /**
   * A gateway that answers every subscribe (ids per connection) and counts the subscribes it
   * holds unanswered at once, as the client's call table sees them.
   */
  async function answeringGateway(holdMs = 0) {
    const subscribed: string[][] = [];
    let waiting = 0;
    let mostWaiting = 0;
    const gateway = await gateways.listen((socket, n) => {
      const topics: string[] = [];
      subscribed[n - 1] = topics;
      socket.on('message', (data) => {
        for (const request of framesOf(data)) {
          if (request.method !== 'subscribe') continue;
          const topic = (request.params as string[])[0]!;
          topics.push(topic);
          mostWaiting = Math.max(mostWaiting, ++waiting);
          setTimeout(() => {
            waiting--;
            reply(socket, request.id, `c${n}-${topic}`);
          }, holdMs);
        }
      });
    });
    return {
      gateway,
      subscribed,
      get mostWaiting() {
        return mostWaiting;
      },
    };
  }

  it('every live subscription is resubscribed after a reconnect, none errors', async () => {
    const server = await answeringGateway(5);
    const c = client(server.gateway.url);
    await c.opened();
    const errors: unknown[] = [];
    const total = 1200;
    // Subscribed in waves the table holds, as an application that spreads them out would.
    for (let wave = 0; wave < 2; wave++) {
      for (let i = wave * 600; i < (wave + 1) * 600; i++) {
        subscriptions.push(c.subscribe(`t${i}`).subscribe({ error: (e) => errors.push(e) }));
      }
      await waitFor(() => server.subscribed[0]!.length === (wave + 1) * 600, 'a wave accepted');
    }
    server.gateway.sockets[0]!.close(1012, 'restart');
    await waitFor(
      () => (server.subscribed[1]?.length ?? 0) === total,
      () => `${server.subscribed[1]?.length} resubscribed, errors: ${String(errors[0])}`,
    );
    expect(errors).toEqual([]);
    expect(new Set(server.subscribed[1]).size).toBe(total);
    // In waves: never more than the window (half the table, at most 64) unanswered at once.
    expect(server.mostWaiting).toBeLessThanOrEqual(MAX_SUBSCRIBE_WINDOW);
  });

  it('subscribes a server refuses as busy for the connection (-32000, maxInFlight) go again; none errors', async () => {
    // The gateway's answer past its maxInFlight: its calls running finish, and its slots free.
    let refusals = 30;
    let unsubscribesRefused = 0;
    const subscribed: string[] = [];
    const unsubscribed: unknown[] = [];
    const gateway = await gateways.listen((socket) => {
      socket.on('message', (data) => {
        for (const request of framesOf(data)) {
          const busy =
            request.method === 'unsubscribe' ? unsubscribesRefused-- > 0 : refusals-- > 0;
          if (busy) {
            send(socket, {
              id: request.id,
              error: { code: -32000, message: 'Server busy', data: { maxInFlight: 128 } },
            });
          } else if (request.method === 'subscribe') {
            const topic = (request.params as string[])[0]!;
            subscribed.push(topic);
            reply(socket, request.id, `id-${topic}`);
          } else if (request.method === 'unsubscribe') {
            unsubscribed.push((request.params as unknown[])[0]);
            reply(socket, request.id, true);
          }
        }
      });
    });
    const c = client(gateway.url);
    await c.opened();
    const errors: unknown[] = [];
    const held = Array.from({ length: 20 }, (_, i) =>
      c.subscribe(`t${i}`).subscribe({ error: (e) => errors.push(e) }),
    );
    await waitFor(
      () => errors.length > 0 || new Set(subscribed).size === 20,
      () => `${new Set(subscribed).size} subscribed, errors: ${String(errors[0])}`,
    );
    expect(errors).toEqual([]);
    // An unsubscribe refused as busy goes again too: the server would keep the subscription.
    unsubscribesRefused = 2;
    held[0]!.unsubscribe();
    await waitFor(() => unsubscribed.length === 1, 'the unsubscribe, sent again');
    expect(unsubscribed).toEqual(['id-t0']);
    subscriptions.push(...held.slice(1));
  });

  it('a subscribe waiting for the window goes when the one in flight, stopped, is refused busy', async () => {
    const subscribed: string[] = [];
    let refuse: (() => void) | undefined;
    const gateway = await gateways.listen((socket) => {
      socket.on('message', (data) => {
        for (const request of framesOf(data)) {
          if (request.method !== 'subscribe') {
            reply(socket, request.id, true);
            continue;
          }
          const topic = (request.params as string[])[0]!;
          subscribed.push(topic);
          if (topic !== 'a') reply(socket, request.id, `id-${topic}`);
          else {
            refuse = () =>
              send(socket, {
                id: request.id,
                error: { code: -32000, message: 'Server busy', data: { maxInFlight: 128 } },
              });
          }
        }
      });
    });
    const c = client(gateway.url, { maxPendingCalls: 2 }); // a window of one subscribe
    await c.opened();
    const a = c.subscribe('a').subscribe();
    await waitFor(() => subscribed.includes('a'), 'a sent');
    const errors: unknown[] = [];
    subscriptions.push(c.subscribe('b').subscribe({ error: (e) => errors.push(e) }));
    // Stopped while its subscribe is in flight, which is then refused as busy.
    a.unsubscribe();
    refuse!();
    await waitFor(() => subscribed.includes('b'), 'b sent', 5_000);
    expect(errors).toEqual([]);
  });

  it('a subscribe made while calls wait for room in the call table goes ahead of them', async () => {
    const seen: string[] = [];
    const gateway = await gateways.listen((socket) => {
      socket.on('message', (data) => {
        for (const request of framesOf(data)) {
          seen.push(request.method!);
          if (request.method === 'subscribe') reply(socket, request.id, 'id-x');
          else setTimeout(() => reply(socket, request.id, 1), 5);
        }
      });
    });
    const c = client(gateway.url, { maxPendingCalls: 2 });
    // A steady load: ten calls kept made, two in the table, the rest in the queue for room (made
    // before the connection opened, and topped up while some wait: all go through the queue).
    let made = 0;
    let outstanding = 0;
    const load: Promise<unknown>[] = [];
    const top = (): void => {
      while (outstanding < 10 && made < 200) {
        made++;
        outstanding++;
        load.push(
          c.call('work').then(() => {
            outstanding--;
            top();
          }),
        );
      }
    };
    top();
    await c.opened();
    await waitFor(() => seen.length >= 4, 'the load under way');
    const before = seen.length;
    const errors: unknown[] = [];
    subscriptions.push(c.subscribe('x').subscribe({ error: (e) => errors.push(e) }));
    await waitFor(() => seen.includes('subscribe'), 'the subscribe sent');
    // At most the two calls the table held were on their way before it.
    expect(seen.indexOf('subscribe') - before).toBeLessThanOrEqual(2);
    expect(errors).toEqual([]);
    made = 200;
    await Promise.all(load);
  });

  it('a reconnect sends the resubscribes ahead of the calls queued while disconnected', async () => {
    const methods: string[][] = [];
    const gateway = await gateways.listen((socket, n) => {
      const seen: string[] = [];
      methods[n - 1] = seen;
      socket.on('message', (data) => {
        for (const request of framesOf(data)) {
          seen.push(request.method!);
          reply(socket, request.id, request.method === 'subscribe' ? `id-${n}-${seen.length}` : 1);
        }
      });
    });
    const c = client(gateway.url);
    await c.opened();
    for (let i = 0; i < 3; i++) subscriptions.push(c.subscribe(`t${i}`).subscribe());
    await waitFor(() => methods[0]?.length === 3, 'three subscribes');
    // Made as the connection is lost, before the next one opens: queued.
    const calls = new Promise<Promise<unknown>[]>((resolve) => {
      const watching = c.state$.subscribe((state) => {
        if (state === 'open') return;
        watching.unsubscribe();
        resolve([c.call('a'), c.call('b')]);
      });
    });
    gateway.sockets[0]!.close(1012, 'restart');
    await Promise.all(await calls);
    expect(methods[1]).toEqual(['subscribe', 'subscribe', 'subscribe', 'a', 'b']);
  });

  it('a table full of calls the server leaves unanswered: the subscribes wait, then go', async () => {
    let release: (() => void) | undefined;
    const subscribed: string[] = [];
    const gateway = await gateways.listen((socket) => {
      const held: ClientFrame[] = [];
      release = () => {
        for (const request of held.splice(0)) reply(socket, request.id, 'late');
      };
      socket.on('message', (data) => {
        for (const request of framesOf(data)) {
          if (request.method === 'slow') held.push(request);
          else if (request.method === 'subscribe') {
            const topic = (request.params as string[])[0]!;
            subscribed.push(topic);
            reply(socket, request.id, `id-${topic}`);
          }
        }
      });
    });
    const logger = new CaptureLogger();
    const c = client(gateway.url, { maxPendingCalls: 4, callTimeoutMs: 0, logger });
    await c.opened();
    const calls = Array.from({ length: 4 }, () => c.call('slow'));
    const errors: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      subscriptions.push(c.subscribe(`t${i}`).subscribe({ error: (e) => errors.push(e) }));
    }
    // Refused by the full table, retried with the backoff: nothing reaches the server yet.
    const retried = () => logged(logger.records, 'subscribe failed: retrying').length;
    await waitFor(() => errors.length > 0 || retried() >= 3, 'the subscribes refused');
    expect(errors).toEqual([]);
    expect(subscribed).toEqual([]);
    release!();
    await Promise.all(calls);
    await waitFor(
      () => subscribed.length === 3,
      () => `${subscribed.length} subscribed`,
    );
    expect(errors).toEqual([]);
  });

  it('joined subscriptions past a small table are resubscribed too', async () => {
    const server = await answeringGateway(2);
    const c = client(server.gateway.url, { maxPendingCalls: 8 });
    await c.opened();
    const ended: unknown[] = [];
    subscriptions.push(
      c.joined$.subscribe(({ subscription }) => {
        subscriptions.push(
          subscription.subscribe({
            error: (e) => ended.push(e),
            complete: () => ended.push('complete'),
          }),
        );
      }),
    );
    const joins = Array.from({ length: 50 }, (_, i) => ({
      jsonrpc: '2.0',
      method: 'rpc.joined',
      params: { topic: `j${i}`, subscription: `s${i}` },
    }));
    server.gateway.sockets[0]!.send(JSON.stringify(joins));
    await waitFor(() => c.subscriptionOf('j49') !== undefined, 'the joins');
    server.gateway.sockets[0]!.close(1012, 'restart');
    await waitFor(
      () => (server.subscribed[1]?.length ?? 0) === 50,
      () => `${server.subscribed[1]?.length} resubscribed, ended: ${String(ended[0])}`,
    );
    expect(ended).toEqual([]);
  });
});

describe('ids the server hands out again', () => {
  it('a message of an ended subscription, read while its unsubscribe is in flight, never reaches a later one given its id', async () => {
    const topics = 300; // more unsubscribes in flight than the client keeps given-up ids
    let unsubscribesAnswered = false;
    const gateway = await gateways.listen((socket) => {
      const held: ClientFrame[] = [];
      let subscribes = 0;
      socket.on('message', (data) => {
        for (const request of framesOf(data)) {
          if (request.method === 'subscribe') {
            // The topic's shared id: the same for every subscription to it.
            const id = `id-${(request.params as string[])[0]!}`;
            reply(socket, request.id, id);
            if (++subscribes > topics) {
              note(socket, { subscription: id, seq: 10 });
              note(socket, { subscription: id, seq: 11, result: 'new' });
            }
          } else if (request.method === 'unsubscribe') held.push(request);
        }
        if (held.length === topics) {
          // Written before the server took the unsubscribes: the old subscription's.
          note(socket, { subscription: 'id-t0', seq: 5, result: 'old' });
          for (const request of held.splice(0)) reply(socket, request.id, true);
          unsubscribesAnswered = true;
        }
      });
    });
    const c = client(gateway.url);
    await c.opened();
    const first = Array.from({ length: topics }, (_, i) => c.subscribe(`t${i}`).subscribe());
    const states = () =>
      Promise.all(
        Array.from({ length: topics }, (_, i) =>
          firstValueFrom(
            subscriptionStatus$(c, `t${i}`).pipe(filter((st) => st.state === 'subscribed')),
          ),
        ),
      );
    await states();
    // A view unmounts: every subscription ends in one turn.
    for (const subscription of first) subscription.unsubscribe();
    await waitFor(() => unsubscribesAnswered, 'the unsubscribes answered');
    // A message read after the answers: the unsubscribes' replies are handled by then.
    const got: string[] = [];
    subscriptions.push(
      c
        .subscribeWithMeta('t0')
        .subscribe((e: SubscriptionEvent<unknown>) => got.push(`${String(e.data)}@${e.seq}`)),
    );
    await waitFor(() => got.length > 0, 'a message');
    expect(got).toEqual(['new@11']);
  });
});

describe('sequence numbers and counts out of range', () => {
  /**
   * A gateway whose first connection sends `script` after the position 0 and m1, then drops;
   * the next connection sends m7..m9. Returns what the Observer saw and the subscribe options.
   */
  async function run(script: Record<string, unknown>[]) {
    const options: unknown[] = [];
    const gateway = await gateways.listen((socket, n) => {
      socket.on('message', (data) => {
        for (const request of framesOf(data)) {
          if (request.method !== 'subscribe') continue;
          options.push((request.params as unknown[])[2]);
          reply(socket, request.id, 'sub1');
          const send = (p: Record<string, unknown>) => note(socket, { subscription: 'sub1', ...p });
          if (n === 1) {
            send({ seq: 0 });
            send({ seq: 1, result: 'm1' });
            for (const p of script) send(p);
            for (let s = 3; s <= 6; s++) send({ seq: s, result: `m${s}` });
          } else {
            for (let s = 7; s <= 9; s++) send({ seq: s, result: `m${s}` });
          }
        }
      });
    });
    const c = client(gateway.url);
    const got: string[] = [];
    subscriptions.push(
      c.subscribeWithMeta('prices').subscribe({
        next: (e: SubscriptionEvent<unknown>) => {
          got.push(e.gap !== undefined ? `gap(${e.gap})` : `${String(e.data)}@${e.seq}`);
          if (e.data === 'm6') gateway.sockets[0]!.close(1001);
        },
        error: (e) => got.push(`ERROR ${String(e)}`),
      }),
    );
    await waitFor(
      () => got.includes('m9@9'),
      () => `only ${got.join(', ')}`,
    );
    return { got, options };
  }

  it('an absurd gap counts as unknown: later messages and the resume go on', async () => {
    const { got, options } = await run([{ gap: 1e300 }, { seq: 2, result: 'm2' }]);
    expect(got).toEqual([
      'm1@1',
      'gap(null)',
      'm2@2',
      'm3@3',
      'm4@4',
      'm5@5',
      'm6@6',
      'm7@7',
      'm8@8',
      'm9@9',
    ]);
    expect(options).toEqual([{ position: true }, { since: 6 }]);
  });

  it('a gap past the safe integers from where it stands counts as unknown', async () => {
    const { got, options } = await run([
      { gap: Number.MAX_SAFE_INTEGER },
      { seq: 2, result: 'm2' },
    ]);
    expect(got.slice(0, 3)).toEqual(['m1@1', 'gap(null)', 'm2@2']);
    expect(options).toEqual([{ position: true }, { since: 6 }]);
  });

  it('a message with an absurd seq or missed is delivered without it, the position kept', async () => {
    const { got, options } = await run([
      { seq: 2, missed: -1e300, result: 'm2' },
      { seq: 1e300, missed: 1e300, result: 'bogus' },
      { seq: -5, result: 'negative' },
      { seq: 2.5, result: 'fraction' },
    ]);
    expect(got).toEqual([
      'm1@1',
      'm2@2',
      'bogus@undefined',
      'negative@undefined',
      'fraction@undefined',
      'm3@3',
      'm4@4',
      'm5@5',
      'm6@6',
      'm7@7',
      'm8@8',
      'm9@9',
    ]);
    expect(options).toEqual([{ position: true }, { since: 6 }]);
  });

  it('the decoder keeps every value the server writes and no other', () => {
    const count = fc.oneof(fc.nat(), fc.maxSafeNat());
    const head = '{"subscription":"s"';
    fc.assert(
      fc.property(count, count, count, (seq, missed, gap) => {
        const message = JSON.parse(
          `${head}${missedPart(missed)}${messageTail('1', seq)}`.slice(0, -1),
        );
        expect(decodeSubscriptionNotification(message)?.update).toEqual({
          kind: 'message',
          result: 1,
          seq,
          ...(missed > 0 ? { missed } : {}),
        });
        const gapped = JSON.parse(`${head}${gapTail(gap, 'e')}`.slice(0, -1));
        expect(decodeSubscriptionNotification(gapped)?.update).toEqual({
          kind: 'gap',
          gap,
          epoch: 'e',
        });
        const position = JSON.parse(`${head}${positionTail(seq)}`.slice(0, -1));
        expect(decodeSubscriptionNotification(position)?.update).toEqual({ kind: 'position', seq });
      }),
    );
    const notCount = fc.oneof(
      fc.integer({ max: -1 }),
      fc.double({ noInteger: true }),
      fc.constantFrom(1e300, -0.5, Number.MAX_SAFE_INTEGER + 1, 2 ** 64, Infinity, NaN),
    );
    fc.assert(
      fc.property(notCount, (bad) => {
        expect(isSequenceNumber(bad)).toBe(false);
        const m = decodeSubscriptionNotification({
          subscription: 's',
          seq: bad,
          missed: bad,
          result: 1,
        });
        expect(m?.update).toEqual({ kind: 'message', result: 1 });
        const g = decodeSubscriptionNotification({ subscription: 's', gap: bad });
        expect(g?.update).toEqual({ kind: 'gap', gap: null });
        const p = decodeSubscriptionNotification({ subscription: 's', seq: bad });
        expect(p?.update).toEqual({ kind: 'other' });
      }),
    );
  });
});
