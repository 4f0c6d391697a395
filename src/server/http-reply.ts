import type { ServerResponse } from 'node:http';
import type { AnsweredReply } from '../peer/answering-peer.js';
import { queueOutput, takePieces, type Pieces } from '../transport/input-turns.js';

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * Write an exchange's reply (AnsweringPeer.answer) to `res` as the turn's output allows, the
 * replies made as they are written, as a connection's are (input-turns.ts): whole, with its
 * length, when the turn holds it; else its first part now or in an output turn and the rest in
 * output turns, in a chunked response, so that one POST of a large batch, or many exchanges whose
 * handlers settle together, do not hold the event loop for every other client. A client that
 * takes less than is made (the response's buffer past its high-water mark) has the rest made once
 * it has taken that. An empty reply (none to send after all) is answered 204. `wrote` runs after
 * each write (what the client has not taken yet counts on the node). Resolves once the reply is
 * written, or once the response ended or closed before it was, its connection closed (a
 * response queued behind another on a pipelined connection hears of neither), or `stop` aborted
 * (a revocation, the shutdown): nothing more is made then.
 */
export function writeReply(
  res: ServerResponse,
  reply: AnsweredReply,
  wrote: () => void,
  stop?: AbortSignal,
): Promise<void> {
  const connection = res.req.socket;
  return new Promise((resolve) => {
    const pieces: Pieces = { source: reply, written: undefined, started: false };
    let settled = false;
    const settle = (): true => {
      if (!settled) {
        settled = true;
        res.off('close', settle);
        res.off('drain', again);
        connection.off('close', settle);
        stop?.removeEventListener('abort', settle);
        resolve();
      }
      return true;
    };
    const finish = (): true => {
      reply.written();
      return settle();
    };
    const writeSome = (): boolean => {
      if (settled || res.writableEnded || res.destroyed || connection.destroyed || stop?.aborted) {
        return settle();
      }
      const taken = takePieces(pieces);
      if (taken === undefined) return false;
      if (!pieces.started) {
        pieces.started = true;
        if (taken.done) {
          writeWhole(res, taken.text);
          wrote();
          return finish();
        }
        // No content-length: the reply goes in chunks.
        res.writeHead(200, { 'content-type': JSON_TYPE, 'cache-control': 'no-store' });
      }
      res.write(taken.text);
      wrote();
      if (taken.done) {
        res.end();
        return finish();
      }
      if (!res.writableNeedDrain) return false;
      // Out of the output turns until the client has taken what is written.
      res.once('drain', again);
      return true;
    };
    const writer = { writeWaiting: writeSome };
    const again = (): void => queueOutput(writer);
    res.once('close', settle);
    connection.once('close', settle);
    stop?.addEventListener('abort', settle, { once: true });
    if (!writeSome()) queueOutput(writer);
  });
}

function writeWhole(res: ServerResponse, text: string): void {
  if (text === '') res.writeHead(204, { 'cache-control': 'no-store' });
  else {
    res.writeHead(200, {
      'content-type': JSON_TYPE,
      'content-length': String(Buffer.byteLength(text)),
      'cache-control': 'no-store',
    });
  }
  res.end(text === '' ? undefined : text);
}
