import { afterEach, describe, expect, it } from 'vitest';
import { Resources } from '../support/resources.js';
import { waitForState } from '../support/client.js';
import { waitUntil } from '../support/waiting.js';

import { sumGateway } from '../support/client.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('rpc.reconnect { url }', () => {
  it('moves to the URL the notice names when it is one of the client’s', async () => {
    const a = await sumGateway(res);
    const c = await sumGateway(res);
    const b = await sumGateway(res);
    const client = res.client([a.url, c.url, b.url]);
    await client.opened();
    expect(client.url).toBe(a.url);

    await a.gateway.drain({ reconnectUrl: b.url, deadlineMs: 2_000 });
    await waitForState(client, 'open');
    expect(client.url).toBe(b.url);
    await waitUntil(() => b.gateway.sessions.size === 1, 'the session on b');
    expect(await client.call('sum', [1, 2])).toBe(3);
    // Straight there: the next URL in the list was skipped.
    expect(c.gateway.sessions.size).toBe(0);
  });

  it('moves to its own next URL when the notice names another', async () => {
    const a = await sumGateway(res);
    const b = await sumGateway(res);
    const client = res.client([a.url, b.url]);
    await client.opened();

    await a.gateway.drain({ reconnectUrl: 'ws://127.0.0.1:1/elsewhere', deadlineMs: 2_000 });
    await waitForState(client, 'open');
    expect(client.url).toBe(b.url);
    expect(await client.call('sum', [2, 2])).toBe(4);
  });
});
