import type { ErrorObject } from '../protocol/types.js';
import type { EncodedFrame } from '../transport/transport.js';

/**
 * Subscription notifications are assembled from fixed pieces so a payload is
 * serialized once per publish, however many subscribers receive it:
 *
 *   head(method) + quotedId + [',"missed":N'] + tail
 *   {"jsonrpc":"2.0","method":"subscription","params":{"subscription":"id" ,"seq":7,"result":<payload>}}
 */
export function notificationHead(method: string): string {
  return `{"jsonrpc":"2.0","method":${JSON.stringify(method)},"params":{"subscription":`;
}

/** The per-message part shared by every subscriber; `seq` is omitted for per-subscriber streams. */
export function messageTail(payload: string, seq?: number): string {
  return seq === undefined ? `,"result":${payload}}}` : `,"seq":${seq},"result":${payload}}}`;
}

export function missedPart(missed: number): string {
  return missed > 0 ? `,"missed":${missed}` : '';
}

/** `,"epoch":"..."` when the broker names its numbering, else nothing. */
function epochPart(epoch: string | undefined): string {
  return epoch === undefined ? '' : `,"epoch":${JSON.stringify(epoch)}`;
}

/**
 * Tells a subscriber that tracks positions that `missed` messages are lost to it: history no
 * longer held them when it resumed, or this node never received them (its broker link was
 * down longer than history reaches). `null`: the broker could not say how many, or lost the
 * topic and numbers it anew. With the topic's epoch when the broker has one.
 */
export function gapTail(missed: number | null, epoch?: string): string {
  return `,"gap":${missed}${epochPart(epoch)}}}`;
}

/** Tells a subscriber that tracks positions which epoch its sequence numbers belong to. */
export function epochTail(epoch: string): string {
  return `${epochPart(epoch)}}}`;
}

/** A subscription's starting point: the last seq it will not get, and the topic's epoch. */
export function positionTail(seq: number, epoch?: string): string {
  return `,"seq":${seq}${epochPart(epoch)}}}`;
}

/** The last notification of a per-subscriber stream: it completed, or failed with `error`. */
export function finalTail(error?: ErrorObject): string {
  return error === undefined ? `,"complete":true}}` : `,"error":${JSON.stringify(error)}}}`;
}

const encoder = new TextEncoder();

/**
 * The frame most subscribers of a topic receive: the same subscription id
 * (each topic has one it hands to every session's first subscription), the
 * same message. Encoded to bytes at most once per publish, then written to
 * every such socket without another copy.
 */
export class SharedFrame implements EncodedFrame {
  private encoded: Uint8Array | undefined;
  private framed: unknown;
  private framedBy: ((bytes: Uint8Array) => unknown) | undefined;
  private others: Map<(bytes: Uint8Array) => unknown, unknown> | undefined;

  constructor(
    readonly quotedId: string,
    readonly text: string,
  ) {}

  get bytes(): Uint8Array {
    return (this.encoded ??= encoder.encode(this.text));
  }

  /**
   * The frame as a transport puts it on the wire (e.g. WebSocket header and
   * payload in one buffer), built by the first transport that asks, once per publish.
   */
  wire<T>(build: (bytes: Uint8Array) => T): T {
    // One cached form per publish is the common case (all subscribers on one kind of
    // transport); a second kind (TCP beside WebSocket) builds its own, cached as well.
    if (this.framedBy === build) return this.framed as T;
    if (this.framedBy === undefined) {
      this.framedBy = build;
      return (this.framed = build(this.bytes)) as T;
    }
    this.others ??= new Map();
    let framed = this.others.get(build);
    if (framed === undefined) this.others.set(build, (framed = build(this.bytes)));
    return framed as T;
  }
}
