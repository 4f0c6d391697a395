/*
 * Every rpc.joined for a topic already joined is unsubscribed on the server, within the window
 * that bounds the unsubscribes of joins refused past maxJoined (half the call table): past it
 * the join is left to the server, its frames dropped unread. A server that repeats a join and
 * never answers the unsubscribes cannot fill the client's call table: the application's own
 * calls still go.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FakeGateways, framesOf, reply, send } from '../support/fake-gateway.js';
import { waitFor } from '../support/waiting.js';

const gateways = new FakeGateways();
afterEach(() => gateways.cleanup());

describe('rpc.joined repeated for one topic', () => {
  it("leaves room in the call table for the application's calls", async () => {
    let unsubscribes = 0;
    let marked = false;
    const gw = await gateways.listen((socket) => {
      socket.on('message', (data) => {
        for (const frame of framesOf(data)) {
          if (frame.method === 'unsubscribe') unsubscribes++; // never answered
          if (frame.method === 'echo') reply(socket, frame.id, 'ok');
          if (frame.id === 'mark' && frame.method === undefined) marked = true;
        }
      });
      for (let i = 0; i < 20; i++) {
        send(socket, { method: 'rpc.joined', params: { topic: 'room', subscription: `j${i}` } });
      }
      // Answered once the client has read every join before it.
      send(socket, { id: 'mark', method: 'mark' });
    });
    const client = gateways.client({ url: gw.url, maxPendingCalls: 8 });
    client.method('mark', () => true);
    await client.opened();
    await waitFor(() => marked, 'the joins read');
    // The first join is taken; of the 19 repeats, as many are unsubscribed as the window holds.
    expect(unsubscribes).toBeGreaterThan(0);
    expect(unsubscribes).toBeLessThanOrEqual(4);
    await expect(client.call('echo')).resolves.toBe('ok');
  });
});
