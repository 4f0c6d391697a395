/*
 * The session ids a message leaves out (BrokerMessage.except), carried on NATS as one header of
 * the JetStream message: the stored copy keeps it, so a consumer that catches up after an outage
 * still skips those sessions.
 */
import { headers } from '@nats-io/transport-node';
import type { MsgHdrs } from '@nats-io/transport-node';
import { parseExcept } from './broker.js';

/** The header holding the left-out session ids, a JSON list. */
export const EXCEPT_HEADER = 'Wsrpc-Except';

/** Headers carrying `except`, or undefined when there is nothing to leave out. */
export function exceptHeaders(except: readonly string[] | undefined): MsgHdrs | undefined {
  if (except === undefined || except.length === 0) return undefined;
  const h = headers();
  h.set(EXCEPT_HEADER, JSON.stringify(except));
  return h;
}

/**
 * The left-out session ids of a received message; undefined when it names none, or 'malformed'
 * when its header is not a list of session ids (the message is for every subscriber then).
 */
export function exceptOf(h: MsgHdrs | undefined): readonly string[] | 'malformed' | undefined {
  const text = h?.get(EXCEPT_HEADER);
  return text ? (parseExcept(text) ?? 'malformed') : undefined;
}
