/**
 * An event stream's response cut right after its session event, as a proxy dropping the stream
 * there would: the session event goes through, the body then ends with an error. `seen` is told
 * the session event's text.
 */
export function cutAfterSessionEvent(
  res: Response,
  seen?: (sessionEvent: string) => void,
): Response {
  if (!res.body) return res;
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const chunk = await reader.read();
      if (chunk.done) return controller.close();
      text += decoder.decode(chunk.value, { stream: true });
      // The session event is the stream's first: it goes through, what follows it does not.
      const session = /^event: session\n[^\n]*\n\n/.exec(text);
      if (!session) return;
      seen?.(session[0]);
      controller.enqueue(new TextEncoder().encode(session[0]));
      await reader.cancel();
      controller.error(new Error('dropped after the session event'));
    },
  });
  return new Response(body, { status: res.status, headers: res.headers });
}
