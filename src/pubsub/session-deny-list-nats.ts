/*
 * NatsBroker's revoked sessions: a JetStream key-value bucket (nats-kv.ts), `<prefix>-deny-session`
 * (the stream `KV_<prefix>-deny-session`), one key per revoked session, `<node>.<session>`, each
 * part encoded as the deny list encodes a user, so a node's records are the keys under
 * `<node>.*`, read in one scan. Each record holds the revocation as JSON and lapses at its own
 * `until`, checked on read; a revocation the full bucket refuses first drops the lapsed
 * records (dropLapsed in deny-list-nats.ts), as Redis trims them; the bucket's max age is the
 * longest revocation allowed (MAX_DENY_FOR_MS), when JetStream drops any left.
 */
import { denyBucket, putMerged } from './deny-list-nats.js';
import type { NatsKvBucket } from './nats-kv.js';
import { bounded } from './nats-link.js';
import type { Link } from './nats-link.js';
import { encodeTopic } from './nats-names.js';
import {
  SessionDenyListFullError,
  closeReasonOf,
  decodeSessionDenial,
  encodeSessionDenial,
  mergeSessionDenials,
} from './session-deny-list.js';
import type { SessionDenial } from './session-deny-list.js';

/** The bucket, and the key of a node's revoked session (`*` for every one of the node's). */
export function natsSessionDenyNames(
  prefix: string,
  node: string,
  session?: string,
): { bucket: string; stream: string; key: string } {
  const bucket = `${prefix}-deny-session`;
  const key = `${encodeTopic(node)}.${session === undefined ? '*' : encodeTopic(session)}`;
  return { bucket, stream: `KV_${bucket}`, key };
}

export class NatsSessionDenyList {
  private readonly bucket: NatsKvBucket;

  constructor(
    private readonly prefix: string,
    replicas: number,
    private readonly timeoutMs: number,
    private readonly maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {
    this.bucket = denyBucket(
      natsSessionDenyNames(prefix, '').bucket,
      replicas,
      maxEntries,
      timeoutMs,
    );
  }

  async deny(
    link: Link,
    node: string,
    session: string,
    revokedAt: number,
    forMs: number,
    reason: string,
  ): Promise<void> {
    const { key } = natsSessionDenyNames(this.prefix, node, session);
    const outcome = await bounded(`revoke session "${session}"`, this.timeoutMs, () =>
      putMerged(
        this.bucket,
        link,
        key,
        (last) => {
          const stored = last ? decodeSessionDenial(last.string()) : undefined;
          return encodeSessionDenial(
            mergeSessionDenials(this.live(stored), {
              session,
              revokedAt,
              until: this.now() + forMs,
              reason: closeReasonOf(reason),
            }),
          );
          // A record that does not read as one revokes nothing: it goes too.
        },
        (value) => !this.live(decodeSessionDenial(value)),
      ),
    );
    if (outcome === 'full') throw new SessionDenyListFullError(this.maxEntries);
  }

  /** The node's records that have not lapsed, in one scan (no bucket: none; reading makes none). */
  async denied(link: Link, node: string): Promise<SessionDenial[]> {
    const { key } = natsSessionDenyNames(this.prefix, node);
    const scan = await bounded(`read the revoked sessions of "${node}"`, this.timeoutMs, () =>
      this.bucket.scan(link, key),
    );
    const records: SessionDenial[] = [];
    for (const entry of scan.entries) {
      const denial = this.live(decodeSessionDenial(entry.value));
      if (denial) records.push(denial);
    }
    return records;
  }

  private live(denial: SessionDenial | undefined): SessionDenial | undefined {
    return denial && denial.until > this.now() ? denial : undefined;
  }
}
