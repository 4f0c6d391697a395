import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';
import { waitUntil } from '../support/waiting.js';
import { Resources } from '../support/resources.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('reaching a session or a user', () => {
  it('notifySession reaches one session by id; an unknown id on this node is false', async () => {
    const { gateway, url } = await res.gateway();
    const client = res.client(url);
    await client.opened();
    await waitUntil(() => gateway.sessions.size === 1, 'the session');
    const [session] = [...gateway.sessions.values()];
    const got = firstValueFrom(client.notificationsOf<{ n: number }>('ping.me'));
    expect(await gateway.notifySession(session!.id, 'ping.me', { n: 1 })).toBe(true);
    expect(await got).toEqual({ n: 1 });
    expect(await gateway.notifySession(`${gateway.nodeId}-nope`, 'ping.me', { n: 2 })).toBe(false);
    expect(session!.id.startsWith(`${gateway.nodeId}-`)).toBe(true);
  });

  it('notifyUser reaches every session of that user and no other', async () => {
    const { gateway, url } = await res.gateway<{ user: string }>({
      authenticate: ({ query }) => {
        const user = query.get('user');
        if (!user) throw new UpgradeRejection(401);
        return { user };
      },
      userOf: (context) => context.user,
    });
    const alice1 = res.client(`${url}?user=alice`);
    const alice2 = res.client(`${url}?user=alice`);
    const bob = res.client(`${url}?user=bob`);
    await Promise.all([alice1.opened(), alice2.opened(), bob.opened()]);
    const bobGot: unknown[] = [];
    bob.notificationsOf('hi').subscribe((p) => bobGot.push(p));
    const a1 = firstValueFrom(alice1.notificationsOf('hi'));
    const a2 = firstValueFrom(alice2.notificationsOf('hi'));
    await gateway.notifyUser('alice', 'hi', ['alice only']);
    expect(await a1).toEqual(['alice only']);
    expect(await a2).toEqual(['alice only']);
    // A round trip on bob's connection proves nothing was on its way to him.
    await bob.call('rpc.ping');
    expect(bobGot).toEqual([]);
  });

  it('topics starting with $ are reserved and cannot be subscribed', async () => {
    const { gateway, url } = await res.gateway();
    expect(() => gateway.topic('$mine')).toThrow(/reserved/);
    gateway.topic('*');
    const client = res.client(url);
    await expect(firstValueFrom(client.subscribe(`$node.${gateway.nodeId}`))).rejects.toMatchObject(
      {
        code: -32602,
      },
    );
  });
});
