import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { useContract } from '../../src/client/contract-client.js';
import { defineContract } from '../../src/contract/contract.js';
import type { JsonRpcError } from '../../src/protocol/errors.js';
import { contractEvents, implementContract } from '../../src/server/contract-server.js';
import type { ContractEvents } from '../../src/server/contract-server.js';
import { rejectionOf } from '../support/promises.js';
import { Resources } from '../support/resources.js';
import { waitUntil } from '../support/waiting.js';

/*
 * `contractEvents(...).notifyUser`: `gateway.notifyUser` typed by the contract's
 * notifications, and checked by them in debug mode.
 */

const res = new Resources();
afterEach(() => res.cleanup());

const mail = defineContract({
  name: 'mail',
  version: '1.0.0',
  methods: {},
  notifications: {
    received: {
      params: z.object({ subject: z.string(), unread: z.number().int() }),
      paramOrder: ['subject', 'unread'],
    },
    cleared: {},
  },
});

interface Ctx {
  user: string | undefined;
}

async function mailGateway(userInbox: boolean) {
  const running = await res.gateway<Ctx>({
    authenticate: ({ query }) => ({ user: query.get('user') ?? undefined }),
    userOf: (context) => context.user,
    ...(userInbox ? { userInbox: { maxLength: 10 } } : {}),
  });
  implementContract(running.gateway, mail, { methods: {} });
  const events = contractEvents(running.gateway, mail, { validateResults: true });
  return { ...running, events };
}

describe('notifyUser typed by the contract', () => {
  it('takes the notification names and params of the contract only', () => {
    type NotifyUser = ContractEvents<typeof mail>['notifyUser'];
    const compileOnly = (notifyUser: NotifyUser) => {
      void notifyUser('ann', 'received', { subject: 'hi', unread: 1 });
      void notifyUser('ann', 'received', ['hi', 1]); // by position, as paramOrder allows
      void notifyUser('ann', 'cleared');
      // @ts-expect-error unread is a number
      void notifyUser('ann', 'received', { subject: 'hi', unread: '1' });
      // @ts-expect-error the params are required
      void notifyUser('ann', 'received');
      // @ts-expect-error nope is not a notification of the contract
      void notifyUser('ann', 'nope', {});
      return notifyUser('ann', 'cleared');
    };
    expectTypeOf(compileOnly).returns.toEqualTypeOf<Promise<number | undefined>>();
  });

  it("reaches every session of the user, and only the user's", async () => {
    const { url, events } = await mailGateway(false);
    const ann = res.client(`${url}?user=ann`);
    const bob = res.client(`${url}?user=bob`);
    const annMail = useContract(ann, mail).notifications('received');
    const bobGot: unknown[] = [];
    useContract(bob, mail)
      .notifications('received')
      .subscribe((params) => bobGot.push(params));
    await Promise.all([ann.opened(), bob.opened()]);
    const first = firstValueFrom(annMail);
    expect(await events.notifyUser('ann', 'received', ['hi', 2])).toBeUndefined();
    expect(await first).toEqual({ subject: 'hi', unread: 2 });
    expect(bobGot).toEqual([]);
  });

  it("with user inboxes, resolves with the message's number in the inbox", async () => {
    const { url, events } = await mailGateway(true);
    const ann = res.client(`${url}?user=ann`);
    await ann.opened();
    expect(await events.notifyUser('ann', 'received', { subject: 'a', unread: 1 })).toBe(1);
    expect(await events.notifyUser('ann', 'cleared')).toBe(2);
  });

  it('debug mode: params off the contract reject -32603, and nothing is sent', async () => {
    const { url, events } = await mailGateway(false);
    const ann = res.client(`${url}?user=ann`);
    const got: unknown[] = [];
    ann.notificationsOf('received').subscribe((params) => got.push(params));
    await ann.opened();
    const error = (await rejectionOf(
      events.notifyUser('ann', 'received', { subject: 'hi', unread: 1.5 }),
    )) as JsonRpcError;
    expect({ code: error.code, message: error.message, data: error.data }).toMatchObject({
      code: -32603,
      message: 'Notification does not match the contract',
      data: { notification: 'received', issues: [{ path: ['unread'] }] },
    });
    await events.notifyUser('ann', 'received', { subject: 'ok', unread: 1 });
    await waitUntil(() => got.length > 0, 'the notification');
    expect(got).toEqual([{ subject: 'ok', unread: 1 }]);
  });
});
