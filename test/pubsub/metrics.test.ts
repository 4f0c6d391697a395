import { afterEach, describe, expect, it } from 'vitest';
import { GatewayMetrics } from '../../src/server/metrics.js';
import { Resources } from '../support/resources.js';
import { RawRpc } from '../support/raw-rpc.js';

const res = new Resources();
afterEach(() => res.cleanup());

describe('rpc_subscriptions', () => {
  it('is labelled by the declared topic, so client-chosen names under room.* make one series', async () => {
    const { gateway, url } = await res.gateway();
    gateway.topic('room.*');
    gateway.topic('news');
    const client = await RawRpc.open(url);
    res.track(client.socket);
    for (let n = 1; n <= 5; n++) await client.request('subscribe', [`room.${n}-${'x'.repeat(n)}`]);
    await client.request('subscribe', ['news']);
    await client.request('subscribe', ['news']);
    expect(Object.keys(gateway.pubsub.topics())).toHaveLength(6);
    expect(gateway.pubsub.subscriptionsByPattern()).toEqual({ 'room.*': 5, news: 2 });

    // The sources the gateway hands its metrics (see GatewayMetrics' MetricsSources).
    const metrics = new GatewayMetrics(
      {
        connections: () => ({ websocket: gateway.sessions.size }),
        subscriptionsByTopic: () => gateway.pubsub.topics(),
        subscriptionsByPattern: () => gateway.pubsub.subscriptionsByPattern(),
        dropped: () => 0,
        slowConsumerDisconnects: () => 0,
        methodLabel: (method: string) => method,
      },
      { defaultMetrics: false },
    );
    const series = (await metrics.render())
      .split('\n')
      .filter((line) => line.startsWith('rpc_subscriptions{'));
    expect(series.sort()).toEqual([
      'rpc_subscriptions{topic="news"} 2',
      'rpc_subscriptions{topic="room.*"} 5',
    ]);
  });
});
