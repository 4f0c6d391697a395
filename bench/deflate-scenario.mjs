// The compression scenario: fan-out of messages large enough to compress (`size` bytes of
// JSON, an order book) to 1,000 subscribers that offer permessage-deflate, against this
// gateway compressing each broadcast once (`perMessageDeflate: true`), the same gateway
// without compression (the baseline), and raw `ws` with and without its own per-socket
// deflate (no context takeover either way, threshold 1 KiB: every socket compresses the same
// frame again). Bytes on the wire are what the subscribers' TCP sockets read in the slice,
// WebSocket headers included, per delivered message.
const figures = [
  { key: 'cpuUsPerMsg', label: 'server CPU µs/published msg', format: 'sig' },
  { key: 'cpuUsPerDelivery', label: 'server CPU µs/delivered msg', format: 'sig' },
  { key: 'wireBytes', label: 'wire bytes/delivered msg', format: 'sig' },
  { key: 'lastMs', label: 'all delivered, ms after 1st publish', format: 'sig' },
];

export const DEFLATE_CONTESTANTS = [
  'gateway-deflate-off',
  'gateway-deflate',
  'ws-deflate-off',
  'ws-deflate',
];

export function deflateScenario(settings) {
  const { subscribers, n, burst, size } = settings.deflate;
  const id = `deflate-${subscribers}`;
  return {
    id,
    kind: 'deflate',
    tables: [
      {
        id,
        title: `Fan-out to ${subscribers.toLocaleString('en-US')} subscribers with permessage-deflate, ${size.toLocaleString('en-US')}-byte messages`,
        about:
          `One topic, ${subscribers} subscriber connections offering permessage-deflate; the ` +
          `server publishes ${n} messages of about ${size} bytes of JSON (an order book), ` +
          `${burst} per event-loop turn. gateway deflate: \`perMessageDeflate: true\`, each ` +
          'message compressed once for every subscriber; ws deflate: raw `ws` with its own ' +
          'per-socket deflate (no context takeover, threshold 1 KiB), which compresses the same ' +
          'frame once per socket; the "off" rows send it uncompressed. Wire bytes: what the ' +
          "subscribers' sockets read, headers included, per delivered message. " +
          '× uncompressed: the figure divided by the gateway without compression, same round.',
        figures,
        baselineId: 'gateway-deflate-off',
        contestantIds: DEFLATE_CONTESTANTS,
        ratioLabel: '× uncompressed',
        checksDelivery: true,
      },
    ],
    run: (ctx, contestant) => runDeflate(ctx, contestant, { id, subscribers, n, burst, size }),
  };
}

async function runDeflate(ctx, contestant, { id, subscribers, n, burst, size }) {
  const { loadgen } = ctx;
  const { child, url } = ctx.server(contestant);
  await loadgen.request(
    'openSubscribers',
    { url, client: contestant.client, count: subscribers },
    120_000,
  );
  try {
    const first = ctx.takeSequence(n);
    await loadgen.request('arm', { first, n });
    const c0 = await child.request('cpu');
    const published = await child.request(
      'publish',
      { first, n, burst, intervalMs: 0, size },
      120_000,
    );
    // Raw ws deflating per socket spends about 120 µs of server CPU per delivery, and the load
    // generator inflates every copy on the other core: 0.3 ms a delivery leaves it room.
    const timeoutMs = 10_000 + n * subscribers * 0.3;
    const got = await loadgen.request('awaitDelivery', { n, timeoutMs }, timeoutMs + 10_000);
    const c1 = await child.request('cpu');
    const problems = [];
    if (got.lost > 0) problems.push(`LOST ${got.lost} of ${got.expected} messages`);
    if (got.outOfOrder > 0) problems.push(`${got.outOfOrder} messages out of order`);
    if (got.stray > 0) problems.push(`${got.stray} messages outside the expected range`);
    const complete = got.incomplete === 0;
    const values = {
      cpuUsPerMsg: (c1.us - c0.us) / n,
      cpuUsPerDelivery: (c1.us - c0.us) / (n * subscribers),
      wireBytes: got.bytesRead / got.received,
      lastMs: complete ? got.lastAt - published.startedAt : undefined,
      lost: Math.max(0, got.lost) + got.outOfOrder + got.stray,
    };
    return [{ table: id, values, problems }];
  } finally {
    await loadgen.request('closeSubscribers', {}, 60_000);
  }
}
