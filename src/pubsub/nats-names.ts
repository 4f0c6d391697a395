/*
 * How topics map onto NATS names: a topic's stream and subject, and the plain subject of a
 * `$`-topic. NATS allows only some characters in names, so topics are encoded here, in one
 * place, and distinct topics never share a stream.
 */
import { createHash } from 'node:crypto';

/** Topics starting with `$` carry messages addressed to a node or a user (see SessionRouter). */
export function isDirect(topic: string): boolean {
  return topic.startsWith('$');
}

const NAME_LIMIT = 128;

/**
 * The stream and subject a topic lives on, under `prefix`.
 *
 * The stream is `<prefix>_<token>`, and a prefix may hold `_` itself, so `a_b` + topic `2Ex`
 * and `a` + topic `b.x` (token `b_2Ex`) would name one stream. A `_` inside a token always
 * starts an escape, `_` and two of `[0-9A-F]`; so under a prefix holding `_` a token never
 * starts with two of `[0-9A-F]` (the first byte is escaped instead: `2Ex` is `_32Ex`), and
 * the `_` after such a prefix can never be read as an escape of a shorter prefix's token.
 * (The long form's `__` cannot be reached either: its head is longer than any prefix.) Every
 * (prefix, topic) pair has a stream of its own; tokens under prefixes without `_` are as
 * they always were. Subjects, `<prefix>.<token>`, are distinct anyway: neither part holds `.`.
 */
export function natsTopicNames(prefix: string, topic: string): { stream: string; subject: string } {
  const token = encode(topic, prefix.includes('_'));
  return { stream: `${prefix}_${token}`, subject: `${prefix}.${token}` };
}

/** The prefix of every topic stream under `prefix` (for listing a deployment's streams). */
export function natsStreamPrefix(prefix: string): string {
  return `${prefix}_`;
}

/** The core NATS subject of a `$`-topic: no stream, no history. */
export function natsDirectSubject(prefix: string, topic: string): string {
  return `${prefix}-direct.${encodeTopic(topic)}`;
}

const HEX_DIGIT = /[0-9A-F]/;

/**
 * A topic as one subject token and stream-name part: `[A-Za-z0-9-]` kept, every
 * other UTF-8 byte (including `_`) written `_XX`, so distinct topics never collide;
 * `_` alone for the empty topic. Long names keep a readable head plus `__` and a hash.
 * (Under a prefix holding `_`, a topic that starts with two of `[0-9A-F]` has its first byte
 * written `_XX` too: see {@link natsTopicNames}.)
 */
export function encodeTopic(topic: string): string {
  return encode(topic, false);
}

function encode(topic: string, escapeHexStart: boolean): string {
  const bytes = Buffer.from(topic, 'utf8');
  const escapeFirst =
    escapeHexStart &&
    bytes.length >= 2 &&
    HEX_DIGIT.test(String.fromCharCode(bytes[0]!)) &&
    HEX_DIGIT.test(String.fromCharCode(bytes[1]!));
  let out = '';
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    const ch = String.fromCharCode(byte);
    const kept = /[A-Za-z0-9-]/.test(ch) && !(i === 0 && escapeFirst);
    out += kept ? ch : `_${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  if (out === '') return '_';
  if (out.length <= NAME_LIMIT) return out;
  const hash = createHash('sha256').update(topic, 'utf8').digest('hex').slice(0, 32);
  return `${out.slice(0, NAME_LIMIT - 34)}__${hash}`;
}
