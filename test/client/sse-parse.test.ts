import { describe, expect, it } from 'vitest';
import { parseEvents } from '../../src/client/sse-transport.js';
import type { SseEvent } from '../../src/client/sse-transport.js';

/** Feed `chunks` one at a time, as a stream reader hands them over; every event parsed. */
function parseChunks(chunks: readonly string[]): SseEvent[] {
  const events: SseEvent[] = [];
  let buffer = '';
  for (const chunk of chunks) buffer = parseEvents(buffer + chunk, events);
  return events;
}

describe('the client reading an event stream', () => {
  it('reads CRLF line ends, also when a chunk ends between the CR and the LF', () => {
    const text = 'id: 1\r\ndata: {"a":1}\r\ndata: {"b":2}\r\n\r\nid: 2\r\ndata: x\r\n\r\n';
    const whole = parseChunks([text]);
    expect(whole).toEqual([
      { id: '1', event: 'message', data: '{"a":1}\n{"b":2}' },
      { id: '2', event: 'message', data: 'x' },
    ]);
    // Every cut of the text into two chunks gives the same events.
    for (let cut = 1; cut < text.length; cut++) {
      expect(parseChunks([text.slice(0, cut), text.slice(cut)]), `cut at ${cut}`).toEqual(whole);
    }
  });
});
