/*
 * The NATS handles of one connection and how operations through them fail. Every part of the
 * broker goes through these, so that each operation is bounded in time and a failure reads
 * the same wherever it happens: NATS unreachable or silent ({@link NatsBrokerUnavailableError})
 * versus JetStream refusing the request.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { JetStreamApiError } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { TopicCreationLimitError } from './broker.js';

/** Thrown (as a rejection) when NATS cannot be reached or does not answer in time. */
export class NatsBrokerUnavailableError extends Error {
  override readonly name = 'NatsBrokerUnavailableError';
}

/** The NATS handles valid for one connection. */
export interface Link {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
}

/** Ignores the outcome of a best-effort operation. */
export const noop = (): void => undefined;

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new NatsBrokerUnavailableError(`NATS broker unavailable: ${what} timed out`)),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Run `op` within `timeoutMs`, turning failures into clear broker errors. */
export async function bounded<T>(
  what: string,
  timeoutMs: number,
  op: () => Promise<T>,
): Promise<T> {
  try {
    return await withTimeout(op(), timeoutMs, what);
  } catch (err) {
    if (err instanceof NatsBrokerUnavailableError || err instanceof TopicCreationLimitError) {
      throw err;
    }
    if (err instanceof JetStreamApiError) {
      throw new Error(`NATS broker: cannot ${what}: ${err.message}`, { cause: err });
    }
    const reason = err instanceof Error ? err.message : String(err);
    throw new NatsBrokerUnavailableError(`NATS broker unavailable: cannot ${what}: ${reason}`, {
      cause: err,
    });
  }
}
