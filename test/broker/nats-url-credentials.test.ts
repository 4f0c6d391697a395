/**
 * Credentials written in a NATS server URL (`nats://user:password@host`, `nats://token@host`) are
 * used to connect, by the broker (NatsBroker, BROKER=nats with NATS_URL) and by a NATS upstream,
 * against a nats-server of its own that refuses connections without them. The NATS client reads
 * no credentials from a URL: given the URL as written, it connects without them and is refused.
 */
import { spawnSync } from 'node:child_process';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrokerMessage } from '../../src/pubsub/broker.js';
import { NatsBroker } from '../../src/pubsub/nats-broker.js';
import { natsServerOptions } from '../../src/pubsub/nats-servers.js';
import { brokerFromEnv } from '../../src/server/broker-from-env.js';
import { resolveUpstreamsConfig } from '../../src/upstream/index.js';
import { openRawSocket } from '../support/gateway.js';
import { NatsAuthServer } from '../support/nats-auth-server.js';
import { waitFor } from '../support/waiting.js';
import { startRoutedGateway } from '../upstream/routed-gateway.js';

const mustRun = process.env.CI === 'true';
const hasNatsServer = spawnSync('nats-server', ['--version'], { stdio: 'ignore' }).status === 0;
/** A password with the characters a URL must percent-encode. */
const users = { 'node a': 'p@ss:w/rd%', responder: 'answer' };
const encoded = `${encodeURIComponent('node a')}:${encodeURIComponent(users['node a'])}`;

let server: NatsAuthServer;
beforeAll(async () => {
  if (hasNatsServer || mustRun) server = await NatsAuthServer.start(users);
});
afterAll(async () => {
  await server?.stop();
});

const withCredentials = (): string => server.url.replace('nats://', `nats://${encoded}@`);

describe('natsServerOptions', () => {
  it('takes user and password, or a token, out of the URLs, percent-decoded', () => {
    expect(natsServerOptions('nats://ann:p%40ss@h1:4222, nats://ann:p%40ss@h2:4222')).toEqual({
      servers: ['nats://h1:4222', 'nats://h2:4222'],
      user: 'ann',
      pass: 'p@ss',
    });
    expect(natsServerOptions(['tls://s3cr%2Ft@h1:4222'])).toEqual({
      servers: ['tls://h1:4222'],
      token: 's3cr/t',
    });
    // An empty password is a password, not a token.
    expect(natsServerOptions('nats://ann:@h1')).toEqual({
      servers: ['nats://h1'],
      user: 'ann',
      pass: '',
    });
    expect(natsServerOptions(['nats://h1:4222', 'h2:4222'])).toEqual({
      servers: ['nats://h1:4222', 'h2:4222'],
    });
  });

  it('refuses URLs with different credentials, or credentials given twice, naming no secret', () => {
    const differ = (): unknown =>
      natsServerOptions(['nats://ann:Sekr1t@h1', 'nats://ann:Sekr2t@h2']);
    expect(differ).toThrow(new TypeError('The NATS server URLs carry different credentials'));
    const twice = (): unknown => natsServerOptions('nats://ann:Sekr1t@h1', { token: 'x' });
    expect(twice).toThrow(/both in a server URL and in the connection options/);
    for (const refuse of [differ, twice]) {
      try {
        refuse();
      } catch (err) {
        expect((err as Error).message).not.toMatch(/Sekr|ann/);
      }
    }
    // Without credentials in the URLs, the connection's own are not touched.
    expect(natsServerOptions('nats://h1', { user: 'ann', pass: 'x' })).toEqual({
      servers: ['nats://h1'],
    });
  });
});

describe.skipIf(!hasNatsServer && !mustRun)('credentials in a NATS URL', () => {
  it('are refused by the server when the client is given the URL as written', async () => {
    await expect(
      connect({ servers: withCredentials(), timeout: 2_000, reconnect: false }),
    ).rejects.toThrow(/Authorization Violation/);
  });

  it('connect the broker, and BROKER=nats with NATS_URL', async () => {
    const prefix = `urlcreds${Date.now().toString(36)}`;
    const direct = await NatsBroker.connect({
      servers: withCredentials(),
      prefix,
      healthCheckIntervalMs: 0,
    });
    const fromEnv = (await brokerFromEnv({
      BROKER: 'nats',
      NATS_URL: withCredentials(),
      BROKER_PREFIX: prefix,
    })) as NatsBroker;
    try {
      const received: BrokerMessage[] = [];
      await direct.subscribe('news', (message) => received.push(message));
      await fromEnv.publish('news', '{"n":1}');
      await waitFor(() => received.length === 1, 'the message across the two brokers');
      expect(received[0]!.payload).toBe('{"n":1}');
    } finally {
      await Promise.all([direct.close(), fromEnv.close()]);
    }
  });

  it('connect a NATS upstream, whose calls are answered', async () => {
    const subject = `creds.${Date.now().toString(36)}`;
    let responder: NatsConnection | undefined;
    let running: Awaited<ReturnType<typeof startRoutedGateway>> | undefined;
    try {
      responder = await connect({ servers: server.url, user: 'responder', pass: 'answer' });
      const subscription = responder.subscribe(subject);
      void (async () => {
        for await (const msg of subscription) {
          const request = msg.json<{ id: number; params: unknown }>();
          msg.respond(JSON.stringify({ jsonrpc: '2.0', id: request.id, result: request.params }));
        }
      })();
      running = await startRoutedGateway({
        upstreams: { billing: { nats: { url: withCredentials(), subject } } },
        methods: { 'billing.*': 'billing' },
      });
      await running.routes.ready;
      const raw = await openRawSocket(`${running.url}?user=dora`);
      try {
        raw.socket.send(
          JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'billing.echo', params: [7] }),
        );
        expect(JSON.parse((await raw.waitFor(1))[0]!)).toEqual({
          jsonrpc: '2.0',
          id: 1,
          result: [7],
        });
      } finally {
        raw.close();
      }
    } finally {
      await running?.close();
      await responder?.close();
    }
  });

  it('are checked when the upstreams are read', () => {
    const config = (url: unknown): unknown => ({
      upstreams: { billing: { nats: { url, subject: 'billing.rpc' } } },
      methods: { 'billing.*': 'billing' },
    });
    expect(() => resolveUpstreamsConfig(config(['nats://a:1@h1', 'nats://a:2@h2']))).toThrow(
      /nats\.url: The NATS server URLs carry different credentials/,
    );
    expect(() => resolveUpstreamsConfig(config('http://secret@h1'))).toThrow(
      /must be a nats:\/\/ or tls:\/\/ URL .*not "http:\/\/\*\*\*@h1"/,
    );
  });
});
