// Every connection slot admission hands out is given back on every way out, and every user hold
// (the node's subscription to the user's messages, taken before a session of the user opens) is
// released: here, identity.issuedAtOf throwing in the last revocation check, the one a session
// of a user revoked while its hold was awaited meets (revokedSince). The broker holds the
// node's subscription for the user until the test lets it go, so the revocation lands inside
// that wait every time.
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { BrokerMessage } from '../../src/pubsub/broker.js';
import { MemoryBroker } from '../../src/pubsub/memory-broker.js';
import type { Admission } from '../../src/server/admission.js';
import type { Gateway } from '../../src/server/gateway.js';
import { startGateway } from '../support/gateway.js';
import type { RunningGateway } from '../support/gateway.js';
import { deferred } from '../support/promises.js';
import { within } from '../support/waiting.js';
import { openRawRpc } from './raw-rpc.js';

interface Ctx {
  user: string;
}

/** A MemoryBroker whose subscription to `$user.<name>` completes only when the test says so. */
class HeldUserBroker extends MemoryBroker {
  private readonly subscribing = deferred();
  private readonly unsubscribing = deferred();
  private readonly opens: (() => void)[] = [];

  /** Resolves once the gateway asked for a user's subscription (held from then on). */
  get asked(): Promise<void> {
    return this.subscribing.promise;
  }

  /** Resolves once the gateway dropped a user's subscription: nothing holds the user any more. */
  get dropped(): Promise<void> {
    return this.unsubscribing.promise;
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

  override unsubscribe(topic: string): Promise<void> {
    if (topic.startsWith('$user.')) this.unsubscribing.resolve();
    return super.unsubscribe(topic);
  }

  openAll(): void {
    for (const open of this.opens.splice(0)) open();
  }
}

const running: RunningGateway<Ctx>[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  for (const { gateway } of running.splice(0)) await gateway.close({ timeoutMs: 0 });
});

/** A gateway where everyone is `ann`, whose `identity.issuedAtOf` always throws. */
async function annGateway(broker?: MemoryBroker): Promise<RunningGateway<Ctx>> {
  const started = await startGateway<Ctx>({
    ...(broker ? { broker } : {}),
    authenticate: () => ({ user: 'ann' }),
    userOf: (context) => context.user,
    identity: {
      issuedAtOf: () => {
        throw new Error('no issue time');
      },
    },
    limits: { connectionsPerSecondPerIp: 0 },
  });
  running.push(started);
  return started;
}

/** annGateway on a broker that holds the node's subscription for ann until the test says. */
async function start(): Promise<{ gateway: Gateway<Ctx>; url: string; broker: HeldUserBroker }> {
  const broker = new HeldUserBroker();
  const { gateway, url } = await annGateway(broker);
  return { gateway, url, broker };
}

function admissionOf(gateway: Gateway<Ctx>): Admission {
  return (gateway as unknown as { admission: Admission }).admission;
}

/** The first line a TCP connection to `port` gets after sending a ping. */
function firstLine(port: number): Promise<unknown> {
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  socket.write('{"jsonrpc":"2.0","id":1,"method":"rpc.ping"}\n');
  return new Promise((resolve, reject) => {
    let read = '';
    socket.on('data', (chunk: Buffer) => {
      read += chunk.toString('utf8');
      const end = read.indexOf('\n');
      if (end !== -1) resolve(JSON.parse(read.slice(0, end)));
    });
    socket.once('error', reject);
  });
}

describe('a revocation check that throws (identity.issuedAtOf)', () => {
  it('refuses a TCP connection as revoked (fail closed); its connection slot and user hold are given back', async () => {
    const { gateway, broker } = await start();
    const { port } = await gateway.listenTcp(0, '127.0.0.1');
    const line = firstLine(port);
    await within(broker.asked, "the gateway's subscription for ann");
    expect(admissionOf(gateway).connections).toBe(1);
    // Lands while the connection waits for its hold: no session of ann to close here.
    expect(await gateway.revokeUser('ann')).toBe(0);
    broker.openAll();
    expect(await within(line, 'the refusal line')).toMatchObject({
      id: null,
      error: { message: 'revoked', data: { status: 401 } },
    });
    expect(admissionOf(gateway).connections).toBe(0);
    await within(broker.dropped, "the gateway to drop ann's subscription");
    expect(gateway.sessions.size).toBe(0);
  });

  it('refuses a WebSocket upgrade as revoked, 401 (fail closed); its connection slot and user hold are given back', async () => {
    const { gateway, url, broker } = await start();
    const refused = openRawRpc(url).then(
      (socket) => {
        socket.close();
        return undefined;
      },
      (err: unknown) => err as { status: number },
    );
    await within(broker.asked, "the gateway's subscription for ann");
    expect(admissionOf(gateway).connections).toBe(1);
    expect(await gateway.revokeUser('ann')).toBe(0);
    broker.openAll();
    expect(await within(refused, 'the refusal')).toMatchObject({ status: 401 });
    expect(admissionOf(gateway).connections).toBe(0);
    await within(broker.dropped, "the gateway to drop ann's subscription");
  });

  it('a revocation ends every session of the user even when issuedAtOf throws for them', async () => {
    const started = await annGateway();
    const first = await openRawRpc(started.url);
    const second = await openRawRpc(started.url);
    expect(await started.gateway.revokeUser('ann')).toBe(2);
    expect((await within(first.closed, 'the first close')).code).toBe(4403);
    expect((await within(second.closed, 'the second close')).code).toBe(4403);
  });
});
