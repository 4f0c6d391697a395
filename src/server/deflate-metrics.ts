import { Counter } from 'prom-client';
import type { Registry } from 'prom-client';
import type { DeflateCounters } from '../transport/deflate-frames.js';

/**
 * The compression of broadcasts, in Prometheus metrics (registered when `perMessageDeflate` is
 * on): how many were compressed, their bytes before and after, and how many compressed frames
 * went out. Deliveries over compressions is how many sockets shared each compression.
 */
export function registerDeflateMetrics(registry: Registry, counters: DeflateCounters): void {
  const registers = [registry];
  new Counter({
    name: 'rpc_deflate_broadcasts_compressed_total',
    help: 'Broadcast messages compressed (once each, for every socket that negotiated permessage-deflate).',
    registers,
    collect() {
      this.reset();
      this.inc(counters.compressions);
    },
  });
  new Counter({
    name: 'rpc_deflate_broadcast_bytes_total',
    help: 'Bytes of compressed broadcasts, before (stage="in") and after (stage="out") compression.',
    labelNames: ['stage'],
    registers,
    collect() {
      this.reset();
      this.inc({ stage: 'in' }, counters.bytesIn);
      this.inc({ stage: 'out' }, counters.bytesOut);
    },
  });
  new Counter({
    name: 'rpc_deflate_broadcast_frames_sent_total',
    help: 'Compressed broadcast frames written to sockets (each a copy of one compression).',
    registers,
    collect() {
      this.reset();
      this.inc(counters.framesSent);
    },
  });
}
