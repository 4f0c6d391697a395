/**
 * Newline-delimited JSON framing, for both ends: `chunk` appended to what `partial` held,
 * cut into whole lines (trimmed, empty ones dropped) and what is left for the next chunk.
 */
export function splitLines(partial: string, chunk: string): { lines: string[]; rest: string } {
  const parts = (partial + chunk).split('\n');
  const rest = parts.pop()!;
  const lines: string[] = [];
  for (const part of parts) {
    const line = part.trim();
    if (line.length > 0) lines.push(line);
  }
  return { lines, rest };
}
