import { addressGroup } from './address-group.js';
import { TokenBucket } from './token-bucket.js';

/** Addresses whose buckets are kept for HTTP callers; the least recently used go first past it. */
export const MAX_ADDRESS_BUCKETS = 10_000;

/**
 * Token buckets per client address group (IPv6 by its /64), for HTTP requests: each request is
 * a session of its own, so an address's bucket outlives them. At most MAX_ADDRESS_BUCKETS are
 * kept, the least recently used forgotten first.
 */
export class AddressBuckets {
  private readonly buckets = new Map<string, TokenBucket>();

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
  ) {}

  /** The bucket of `remoteAddress`'s group (made when missing), now the most recently used. */
  of(remoteAddress: string | undefined): TokenBucket {
    const key = remoteAddress === undefined ? 'unknown' : addressGroup(remoteAddress);
    let bucket = this.buckets.get(key);
    if (bucket) this.buckets.delete(key);
    else {
      bucket = new TokenBucket(this.perSecond, this.burst);
      if (this.buckets.size >= MAX_ADDRESS_BUCKETS) {
        this.buckets.delete(this.buckets.keys().next().value!);
      }
    }
    this.buckets.set(key, bucket);
    return bucket;
  }
}

/**
 * limits.bytesPerSecondPerIp for HTTP bodies (POST /rpc and an event stream's POSTs), burst two
 * messages of the largest cost: `maxMessageBytes`, or `messageCostBytes` when that is more (a
 * body costs at least it), so that two POSTs one after the other are never refused for a burst
 * too small for them, however soon the second comes; and at least two milliseconds of the rate:
 * the bucket refills by whole milliseconds, so with less, POSTs well within the rate that came
 * in one millisecond would be refused (three small ones, at 8 MiB/s). Undefined when off.
 */
export function postByteBuckets(limits: {
  bytesPerSecondPerIp: number;
  maxMessageBytes: number;
  messageCostBytes: number;
}): AddressBuckets | undefined {
  const { bytesPerSecondPerIp, maxMessageBytes, messageCostBytes } = limits;
  return bytesPerSecondPerIp > 0
    ? new AddressBuckets(
        bytesPerSecondPerIp,
        Math.max(2 * Math.max(maxMessageBytes, messageCostBytes), bytesPerSecondPerIp / 500),
      )
    : undefined;
}
