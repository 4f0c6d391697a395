/**
 * A URL fit for logs: no userinfo, query string or fragment, where tokens
 * usually travel (`ws://host/rpc?token=...`). Browser-safe: uses only `URL`.
 */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  } catch {
    // Not a URL the parser takes: cut it by hand.
    return url.replace(/[?#].*$/s, '').replace(/^([^/]*\/\/)[^/@]*@/, '$1');
  }
}

/** An error whose message may quote `url` (e.g. "Invalid URL: ..."), with the URL redacted. */
export function redactErrorUrl(err: unknown, url: string): unknown {
  if (!(err instanceof Error) || !err.message.includes(url)) return err;
  const safe = redactUrl(url);
  const copy = new Error(err.message.split(url).join(safe));
  copy.name = err.name;
  copy.stack = err.stack?.split(url).join(safe);
  return copy;
}
