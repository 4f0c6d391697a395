/*
 * NatsBroker's deny list: a JetStream key-value bucket, `<prefix>-deny` (the stream
 * `KV_<prefix>-deny`, one subject per user, `$KV.<prefix>-deny.<encoded user>`, the layout of a
 * NATS KV bucket, so the `nats kv` tools read it). Each entry holds `revokedAt:until` and lapses
 * at its own `until`, checked on read; the bucket's max age is the longest revocation allowed
 * (MAX_DENY_FOR_MS), which is when JetStream drops an entry for good.
 */
import {
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import type { StreamConfig, StoredMsg } from '@nats-io/jetstream';
import {
  DenyListFullError,
  MAX_DENY_FOR_MS,
  decodeDenial,
  encodeDenial,
  mergeDenials,
} from './deny-list.js';
import type { Denial } from './deny-list.js';
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

export class NatsDenyList {
  /** The connection the bucket was last made sure of (a new one checks again). */
  private ensuredOn: Link | undefined;

  constructor(
    private readonly prefix: string,
    private readonly replicas: number,
    private readonly timeoutMs: number,
    private readonly maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {}

  async deny(link: Link, user: string, revokedAt: number, forMs: number): Promise<void> {
    const names = natsDenyNames(this.prefix, user);
    const outcome = await bounded(`deny "${user}"`, this.timeoutMs, async () => {
      await this.ensureBucket(link, names.stream, names.bucket);
      for (let attempt = 1; ; attempt++) {
        try {
          const last = await this.last(link, names.stream, names.subject);
          const next = mergeDenials(this.live(last), { revokedAt, until: this.now() + forMs });
          await link.js.publish(names.subject, encodeDenial(next), {
            timeout: this.timeoutMs,
            // Written over exactly the entry read, or tried again: two nodes revoking one user
            // at once both count.
            expect: { lastSubjectSequence: last?.seq ?? 0 },
          });
          return 'denied';
        } catch (err) {
          if (isFull(err)) return 'full';
          if (attempt >= MAX_ATTEMPTS) throw err;
          if (isStreamNotFound(err) || isNoResponders(err)) {
            // The bucket was deleted behind our back: made again.
            this.ensuredOn = undefined;
            await this.ensureBucket(link, names.stream, names.bucket);
          } else if (!isWrongLastSequence(err)) throw err;
        }
      }
    });
    if (outcome === 'full') throw new DenyListFullError(this.maxEntries);
  }

  async denied(link: Link, user: string): Promise<Denial | undefined> {
    const names = natsDenyNames(this.prefix, user);
    const last = await bounded(`read the deny list for "${user}"`, this.timeoutMs, async () => {
      try {
        return await this.last(link, names.stream, names.subject);
      } catch (err) {
        // No bucket: nobody was ever revoked here. Reading makes none.
        if (isStreamNotFound(err)) return null;
        throw err;
      }
    });
    return this.live(last);
  }

  private live(last: StoredMsg | null): Denial | undefined {
    const denial = last ? decodeDenial(last.string()) : undefined;
    return denial && denial.until > this.now() ? denial : undefined;
  }

  private last(link: Link, stream: string, subject: string): Promise<StoredMsg | null> {
    return link.jsm.streams.getMessage(stream, { last_by_subj: subject });
  }

  private async ensureBucket(link: Link, stream: string, bucket: string): Promise<void> {
    if (this.ensuredOn === link) return;
    const config: Partial<StreamConfig> & Pick<StreamConfig, 'name'> = {
      name: stream,
      subjects: [`$KV.${bucket}.>`],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      // Full means a revocation refused, never an older one dropped.
      discard: DiscardPolicy.New,
      max_msgs: this.maxEntries,
      max_msgs_per_subject: 1,
      max_age: MAX_DENY_FOR_MS * 1e6,
      num_replicas: this.replicas,
      allow_rollup_hdrs: true,
      deny_delete: true,
      allow_direct: true,
      duplicate_window: 120_000_000_000,
    };
    try {
      await link.jsm.streams.add(config);
    } catch (err) {
      // Made by another node with other settings (its own bound): used as it is.
      if (!(err instanceof JetStreamApiError) || err.code !== STREAM_NAME_IN_USE) throw err;
    }
    this.ensuredOn = link;
  }
}

/** JetStream's "stream name already in use (with a different configuration)". */
const STREAM_NAME_IN_USE = 10058;

function isWrongLastSequence(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence;
}

/** The bucket holds `max_msgs` entries already (discard new). */
function isFull(err: unknown): boolean {
  return err instanceof JetStreamApiError && /maximum messages/i.test(err.message);
}
