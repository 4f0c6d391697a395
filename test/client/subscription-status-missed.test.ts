/*
 * Messages the server skipped for a slow consumer (`missed` on the message after them) are a
 * 'gap' in subscriptionStatus$ with their count, as messages history no longer held are: an app
 * on `subscribe`, `iterate` or the React hooks hears of them there. A scripted server sends the
 * frames a gateway sends under its 'drop' policy.
 */
import { afterEach, expect, it } from 'vitest';
import { subscriptionStatus$ } from '../../src/client/index.js';
import type { SubscriptionStatus } from '../../src/client/subscription-status.js';
import { FakeGateways } from '../support/fake-gateway.js';
import type { ClientFrame } from '../support/fake-gateway.js';
import { waitFor } from '../support/waiting.js';

const fakes = new FakeGateways();
afterEach(() => fakes.cleanup());

it("a message after skipped ones is told as a 'gap' of their count, then 'subscribed'", async () => {
  const frames: ClientFrame[] = [];
  const { url, sockets } = await fakes.listen((socket) =>
    socket.on('message', (data) =>
      frames.push(JSON.parse((data as Buffer).toString('utf8')) as ClientFrame),
    ),
  );
  const client = fakes.client({ url });
  await client.opened();
  const statuses: SubscriptionStatus[] = [];
  const data: unknown[] = [];
  fakes.subscriptions.push(
    client.subscribe('t').subscribe((d) => data.push(d)),
    subscriptionStatus$(client, 't').subscribe((s) => statuses.push(s)),
  );
  await waitFor(() => frames.some((f) => f.method === 'subscribe'), 'the subscribe');
  const { id } = frames.find((f) => f.method === 'subscribe')!;
  const message = (seq: number, result: string, missed?: number): string =>
    JSON.stringify({
      jsonrpc: '2.0',
      method: 'subscription',
      params: { subscription: '0x1', seq, result, ...(missed !== undefined && { missed }) },
    });
  sockets[0]!.send(JSON.stringify({ jsonrpc: '2.0', result: '0x1', id }));
  sockets[0]!.send(message(1, 'a'));
  // 2, 3 and 4 skipped for a slow consumer: told on 5.
  sockets[0]!.send(message(5, 'e', 3));
  sockets[0]!.send(message(6, 'f', 0));
  await waitFor(() => data.length === 3, 'the messages');
  expect(data).toEqual(['a', 'e', 'f']);
  expect(
    statuses.map(({ state, missed }) => (missed === undefined ? state : { state, missed })),
  ).toEqual(['connecting', 'subscribed', { state: 'gap', missed: 3 }, 'subscribed']);
  // Nothing of it was taken for a hole to fill: no resubscribe.
  expect(frames.filter((f) => f.method === 'subscribe')).toHaveLength(1);
});
