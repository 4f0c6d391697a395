import { ErrorCode } from '../protocol/error-codes.js';
import { JsonRpcError } from '../protocol/errors.js';
import type { ErrorObject } from '../protocol/types.js';
import type { Transport, TransportListener } from '../transport/transport.js';

interface WatchedBatch {
  /** Members in the frame, notifications included (what the server counts). */
  size: number;
  fail: (err: JsonRpcError) => void;
}

const NULL_ID = /"id"\s*:\s*null/;

function batchTooLarge(message: unknown): ErrorObject | undefined {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return undefined;
  const { id, error } = message as { id?: unknown; error?: unknown };
  if (id !== null || typeof error !== 'object' || error === null) return undefined;
  const { code, message: text } = error as Partial<ErrorObject>;
  if (code !== ErrorCode.BatchTooLarge || typeof text !== 'string') return undefined;
  return error as ErrorObject;
}

/**
 * The transport under one client connection, watching for the single error a
 * server answers a whole batch with when it refuses it (-32002 Batch too
 * large, id null). That reply matches no call, so on its own the peer would
 * leave every member of the batch waiting for its timeout.
 */
export class BatchWatchTransport implements Transport {
  private readonly batches = new Set<WatchedBatch>();

  constructor(private readonly inner: Transport) {}

  get bufferedAmount(): number {
    return this.inner.bufferedAmount;
  }

  send(frame: string): void {
    this.inner.send(frame);
  }

  close(code?: number, reason?: string): void {
    this.inner.close(code, reason);
  }

  listen(listener: TransportListener): void {
    this.inner.listen({
      receive: (text) => {
        listener.receive(text);
        if (this.batches.size > 0) this.inspect(text);
      },
      transportClosed: (code, reason) => {
        this.batches.clear();
        listener.transportClosed(code, reason);
      },
    });
  }

  /** Watch a batch frame of `size` members just sent; returns the function that stops watching it. */
  watch(size: number, fail: (err: JsonRpcError) => void): () => void {
    const batch: WatchedBatch = { size, fail };
    this.batches.add(batch);
    return () => this.batches.delete(batch);
  }

  private inspect(text: string): void {
    // Cheap tests first: only a lone error object with a null id can be the refusal.
    if (!NULL_ID.test(text) || text.trimStart().startsWith('[')) return;
    let error: ErrorObject | undefined;
    try {
      error = batchTooLarge(JSON.parse(text));
    } catch {
      return;
    }
    if (!error) return;
    const received = (error.data as { received?: unknown } | undefined)?.received;
    // The server refuses a batch as soon as it reads it, and reads frames in order: the
    // oldest batch still watched with that many members is the one refused.
    for (const batch of this.batches) {
      if (typeof received === 'number' && batch.size !== received) continue;
      this.batches.delete(batch);
      batch.fail(JsonRpcError.fromErrorObject(error));
      return;
    }
  }
}
