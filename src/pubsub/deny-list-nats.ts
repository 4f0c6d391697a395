/*
 * NatsBroker's deny list: a JetStream key-value bucket (nats-kv.ts), `<prefix>-deny` (the stream
 * `KV_<prefix>-deny`, one subject per user, `$KV.<prefix>-deny.<encoded user>`, the layout of a
 * NATS KV bucket, so the `nats kv` tools read it). Each entry holds `revokedAt:until` and lapses
 * at its own `until`, checked on read; a revocation the full bucket refuses first drops the
 * lapsed entries (see dropLapsed), as Redis expires them; the bucket's max age is the longest
 * revocation allowed (MAX_DENY_FOR_MS), when JetStream drops any left.
 */
import { JetStreamApiError } from '@nats-io/jetstream';
import type { StoredMsg } from '@nats-io/jetstream';
import {
  DenyListFullError,
  MAX_DENY_FOR_MS,
  decodeDenial,
  encodeDenial,
  mergeDenials,
} from './deny-list.js';
import type { Denial } from './deny-list.js';
import { NatsKvBucket, isWrongLastSequence } from './nats-kv.js';
import { bounded } from './nats-link.js';
import type { Link } from './nats-link.js';
import { encodeTopic } from './nats-names.js';
import { isNoResponders, isStreamNotFound } from './nats-streams.js';

/** Revocations of one user racing from several nodes: each is tried again this often at most. */
const MAX_ATTEMPTS = 5;

/** The bucket, its stream and the subject of a user's entry under `prefix`. */
export function natsDenyNames(
  prefix: string,
  user: string,
): { bucket: string; stream: string; subject: string } {
  const bucket = `${prefix}-deny`;
  return { bucket, stream: `KV_${bucket}`, subject: `$KV.${bucket}.${encodeTopic(user)}` };
}

/**
 * A bucket of revocations (users' or sessions'): entries kept as long as the longest revocation
 * allowed, none deleted but by age.
 */
export function denyBucket(
  bucket: string,
  replicas: number,
  maxEntries: number,
  timeoutMs: number,
): NatsKvBucket {
  return new NatsKvBucket(
    {
      bucket,
      replicas,
      // Full means a revocation refused, never an older one dropped.
      discard: 'new',
      maxEntries,
      maxAgeMs: MAX_DENY_FOR_MS,
      denyDelete: true,
    },
    timeoutMs,
  );
}

/** Entries a look for lapsed ones reads at once (see dropLapsed). */
const LAPSED_PAGE = 1_000;

/**
 * Write `merge(last)` over the record under `key` exactly as read, reading again when another
 * node wrote between (two nodes revoking at once both count), at most MAX_ATTEMPTS times; a
 * bucket deleted behind our back is made again. Refused for room, the records that `lapsed`
 * says lapsed are dropped and the write tried once more: 'full' when it is refused again.
 */
export async function putMerged(
  bucket: NatsKvBucket,
  link: Link,
  key: string,
  merge: (last: StoredMsg | null) => string,
  lapsed: (value: string) => boolean,
): Promise<'denied' | 'full'> {
  await bucket.ensure(link);
  let madeRoom = false;
  for (let attempt = 1; ; attempt++) {
    try {
      const last = await bucket.last(link, key);
      await bucket.put(link, key, merge(last), last?.seq ?? 0);
      return 'denied';
    } catch (err) {
      if (isFull(err)) {
        if (madeRoom || !(await dropLapsed(bucket, link, lapsed))) return 'full';
        madeRoom = true;
        continue;
      }
      if (attempt >= MAX_ATTEMPTS) throw err;
      if (isStreamNotFound(err) || isNoResponders(err)) {
        bucket.forget();
        await bucket.ensure(link);
      } else if (!isWrongLastSequence(err)) throw err;
    }
  }
}

/**
 * Drop lapsed records from the bucket, so that they count toward its bound no longer than they
 * hold (the bucket's max age alone would keep each for a day): the records are read in the
 * order they were written, a page at a time, up to the first page that holds lapsed ones,
 * which are purged, each only as it was read (one written again since stays). A bucket full
 * of live records is read to its end (at most its bound) for each revocation it refuses. True
 * when any went.
 */
export async function dropLapsed(
  bucket: NatsKvBucket,
  link: Link,
  lapsed: (value: string) => boolean,
): Promise<boolean> {
  for (let after = 0; ;) {
    const scan = await bucket.scan(link, '>', after, LAPSED_PAGE);
    const gone = scan.entries.filter((entry) => lapsed(entry.value));
    if (gone.length > 0) {
      const purged = await Promise.all(
        gone.map((entry) => bucket.purgeUpTo(link, entry.key, entry.seq)),
      );
      if (purged.some((count) => count > 0)) return true;
    }
    const last = scan.entries.at(-1);
    if (!last || scan.matched <= scan.entries.length) return false;
    after = last.seq;
  }
}

export class NatsDenyList {
  private readonly bucket: NatsKvBucket;

  constructor(
    prefix: string,
    replicas: number,
    private readonly timeoutMs: number,
    private readonly maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {
    this.bucket = denyBucket(natsDenyNames(prefix, '').bucket, replicas, maxEntries, timeoutMs);
  }

  async deny(link: Link, user: string, revokedAt: number, forMs: number): Promise<void> {
    const key = encodeTopic(user);
    const outcome = await bounded(`deny "${user}"`, this.timeoutMs, () =>
      putMerged(
        this.bucket,
        link,
        key,
        (last) =>
          encodeDenial(mergeDenials(this.live(last), { revokedAt, until: this.now() + forMs })),
        // An entry that does not read as one denies nobody: it goes too.
        (value) => !((decodeDenial(value)?.until ?? 0) > this.now()),
      ),
    );
    if (outcome === 'full') throw new DenyListFullError(this.maxEntries);
  }

  async denied(link: Link, user: string): Promise<Denial | undefined> {
    // No bucket: nobody was ever revoked here. Reading makes none.
    const last = await bounded(`read the deny list for "${user}"`, this.timeoutMs, () =>
      this.bucket.last(link, encodeTopic(user)),
    );
    return this.live(last);
  }

  private live(last: StoredMsg | null): Denial | undefined {
    const denial = last ? decodeDenial(last.string()) : undefined;
    return denial && denial.until > this.now() ? denial : undefined;
  }
}

/** The bucket holds `max_msgs` entries already (discard new). */
export function isFull(err: unknown): boolean {
  return err instanceof JetStreamApiError && /maximum messages/i.test(err.message);
}
