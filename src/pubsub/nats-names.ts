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

/** The stream and subject a topic lives on, under `prefix`. */
export function natsTopicNames(prefix: string, topic: string): { stream: string; subject: string } {
  const token = encodeTopic(topic);
  return { stream: `${prefix}_${token}`, subject: `${prefix}.${token}` };
}

/** The core NATS subject of a `$`-topic: no stream, no history. */
export function natsDirectSubject(prefix: string, topic: string): string {
  return `${prefix}-direct.${encodeTopic(topic)}`;
}

/**
 * A topic as one subject token and stream-name part: `[A-Za-z0-9-]` kept, every
 * other UTF-8 byte (including `_`) written `_XX`, so distinct topics never collide;
 * `_` alone for the empty topic. Long names keep a readable head plus `__` and a hash.
 */
export function encodeTopic(topic: string): string {
  let out = '';
  for (const byte of Buffer.from(topic, 'utf8')) {
    const ch = String.fromCharCode(byte);
    out += /[A-Za-z0-9-]/.test(ch) ? ch : `_${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  if (out === '') return '_';
  if (out.length <= NAME_LIMIT) return out;
  const hash = createHash('sha256').update(topic, 'utf8').digest('hex').slice(0, 32);
  return `${out.slice(0, NAME_LIMIT - 34)}__${hash}`;
}
