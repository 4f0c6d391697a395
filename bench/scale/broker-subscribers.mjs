// The subscribers of bench/scale/brokers.mjs, in a process of their own (so the publisher's
// process is not also the one reading every copy): `count` connections to Redis or NATS, each
// subscribed to the bench channel, counting what arrives. Driven over IPC (bench/ipc.mjs).
import { serve } from '../ipc.mjs';

const CHANNEL = 'scale-bench';
let closeAll = async () => undefined;
let received = 0;

serve({
  async start({ broker, count, url }) {
    if (broker === 'redis') {
      const { Redis } = await import('ioredis');
      const clients = [];
      for (let i = 0; i < count; i++) {
        const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
        await client.connect();
        client.on('messageBuffer', () => received++);
        await client.subscribe(CHANNEL);
        clients.push(client);
      }
      closeAll = async () => void (await Promise.all(clients.map((c) => c.quit())));
    } else {
      const { connect } = await import('@nats-io/transport-node');
      const conns = [];
      for (let i = 0; i < count; i++) {
        const nc = await connect({ servers: url });
        nc.subscribe(CHANNEL, { callback: () => received++ });
        await nc.flush();
        conns.push(nc);
      }
      closeAll = async () => void (await Promise.all(conns.map((nc) => nc.close())));
    }
    return { channel: CHANNEL };
  },
  count: () => received,
  async stop() {
    await closeAll();
    return null;
  },
});
