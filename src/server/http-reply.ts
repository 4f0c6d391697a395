import type { ServerResponse } from 'node:http';
import type { AnsweredReply } from '../peer/answering-peer.js';
import { queueOutput, takePieces, type Pieces } from '../transport/input-turns.js';

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * Write an exchange's reply (AnsweringPeer.answer) to `res` as the turn's output allows, the
 * replies made as they are written, as a connection's are (input-turns.ts): whole, with its
 * length, when the turn holds it; else its first part now or in an output turn and the rest in
 * output turns, in a chunked response, so that one POST of a large batch, or many exchanges whose
 * handlers settle together, do not hold the event loop for every other client. An empty reply
 * (none to send after all) is answered 204. `begun` runs once the response is under way and not
 * finished (what its client has not taken yet then counts on the node). Resolves once the reply
 * is written, or when the response ended or closed before it was (a revocation's 403, a client
 * gone: nothing more is made).
 */
export function writeReply(
  res: ServerResponse,
  reply: AnsweredReply,
  begun: () => void,
): Promise<void> {
  return new Promise((resolve) => {
    const pieces: Pieces = { source: reply, written: undefined, started: false };
    const writeSome = (): boolean => {
      if (res.writableEnded || res.destroyed) {
        resolve();
        return true;
      }
      const taken = takePieces(pieces);
      if (taken === undefined) return false;
      if (!pieces.started) {
        pieces.started = true;
        if (taken.done) {
          writeWhole(res, taken.text);
          begun();
          return finish();
        }
        // No content-length: the reply goes in chunks.
        res.writeHead(200, { 'content-type': JSON_TYPE, 'cache-control': 'no-store' });
        res.write(taken.text);
        begun();
      } else res.write(taken.text);
      if (!taken.done) return false;
      res.end();
      return finish();
    };
    const finish = (): true => {
      reply.written();
      resolve();
      return true;
    };
    if (!writeSome()) queueOutput({ writeWaiting: writeSome });
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
