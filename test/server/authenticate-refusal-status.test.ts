// docs/identity.md, "Close codes and errors": an `rpc.authenticate` refused is -32010 with
// `data: { reason, status }`, every reason alike: the refusals the gateway makes itself (a refresh
// for another user, an identity that has expired, a user revoked while its session was being
// announced, a userOf that throws) carry the HTTP status the same refusal has at the upgrade.
import { afterEach, describe, expect, it } from 'vitest';
import type { BrokerMessage } from '../../src/pubsub/broker.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import type { GatewayOptions } from '../../src/server/options.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { deferred } from '../support/promises.js';
import { within } from '../support/waiting.js';
import { token, tokenIdentity } from './identity-tokens.js';
import type { TestContext } from './identity-tokens.js';
import { openRawRpc } from './raw-rpc.js';
import type { RawRpc } from './raw-rpc.js';

const running: RunningGateway<TestContext>[] = [];
const sockets: RawRpc[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.close();
  for (const { gateway } of running.splice(0)) await gateway.close({ timeoutMs: 0 });
});

/** A gateway whose identity comes from test tokens, with in-band authentication. */
async function start(options: GatewayOptions<TestContext> = {}) {
  const identity = tokenIdentity({ inBand: true });
  const started = await startGateway<TestContext>({ ...identity, ...options });
  running.push(started);
  return started;
}

async function open(url: string, headers?: Record<string, string>): Promise<RawRpc> {
  const socket = await openRawRpc(url, headers);
  sockets.push(socket);
  return socket;
}

/** The HTTP status an upgrade with `bearer` is refused with. */
async function upgradeStatus(url: string, bearer: string): Promise<unknown> {
  const refused = await open(url, { authorization: `Bearer ${bearer}` }).then(
    () => 'open',
    (err: { status?: number }) => err.status,
  );
  return refused;
}

describe('rpc.authenticate refusals of the gateway itself carry data.status', () => {
  it('a refresh for another user: user-changed, 401', async () => {
    const { url } = await start();
    const socket = await open(url);
    const first = await socket.request('rpc.authenticate', { token: token({ user: 'ann' }) });
    expect(first.error).toBeUndefined();
    const other = await socket.request('rpc.authenticate', { token: token({ user: 'bob' }) });
    expect(other.error).toEqual({
      code: -32010,
      message: 'The token is for another user than the session',
      data: { reason: 'user-changed', status: 401 },
    });
  });

  it('an identity that has expired: expired, 401, as the upgrade refuses it', async () => {
    const { url } = await start();
    const expired = token({ user: 'ann', ttl: -60_000 });
    const socket = await open(url);
    const refused = await socket.request('rpc.authenticate', { token: expired });
    expect(refused.error).toEqual({
      code: -32010,
      message: 'The token has expired',
      data: { reason: 'expired', status: 401 },
    });
    expect(await upgradeStatus(url, expired)).toBe(401);
  });

  it('a userOf that throws: unavailable, 500, as the upgrade refuses it', async () => {
    const { url } = await start({
      userOf: (context) => {
        if (context.user === 'boom') throw new Error('no user');
        return context.user;
      },
    });
    const socket = await open(url);
    const refused = await socket.request('rpc.authenticate', { token: token({ user: 'boom' }) });
    expect(refused.error).toEqual({
      code: -32010,
      message: 'Authentication failed',
      data: { reason: 'unavailable', status: 500 },
    });
    expect(await upgradeStatus(url, token({ user: 'boom' }))).toBe(500);
  });

  it('a user revoked while its in-band session was announced: revoked, 401, then 4403', async () => {
    const broker = new HeldUserBroker();
    const { url, gateway } = await start({ broker });
    const socket = await open(url);
    const answer = socket.request('rpc.authenticate', { token: token({ user: 'ann' }) });
    await within(broker.asked, "the gateway's subscription for ann");
    await gateway.revokeUser('ann');
    broker.openAll();
    expect((await within(answer, 'the answer')).error).toEqual({
      code: -32010,
      message: 'revoked',
      data: { reason: 'revoked', status: 401 },
    });
    expect((await within(socket.closed, 'the close')).code).toBe(4403);
    // At the upgrade, the deny list refuses the same user with 401.
    expect(await upgradeStatus(url, token({ user: 'ann' }))).toBe(401);
  });
});

/**
 * A MemoryBroker whose subscription to `$user.<name>` completes only when the test says so: a
 * revocation made meanwhile lands while the in-band session waits to be announced.
 */
class HeldUserBroker extends MemoryBroker {
  private readonly subscribing = deferred();
  private readonly opens: (() => void)[] = [];

  /** Resolves once the gateway asked for a user's subscription (held from then on). */
  get asked(): Promise<void> {
    return this.subscribing.promise;
  }

  override async subscribe(
    topic: string,
    deliver: (message: BrokerMessage) => void,
  ): Promise<void> {
    if (topic.startsWith('$user.')) {
      this.subscribing.resolve();
      await new Promise<void>((resolve) => this.opens.push(resolve));
    }
    return super.subscribe(topic, deliver);
  }

  openAll(): void {
    for (const open of this.opens.splice(0)) open();
  }
}
