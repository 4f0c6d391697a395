/** The element with this id; the page is ours, so a missing one is a bug worth a loud error. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (!element) throw new Error(`#${id} is missing from the page`);
  return element as T;
}

export function clock(at = Date.now()): string {
  return new Date(at).toLocaleTimeString([], { hour12: false });
}

/** Append a line to the connection log (newest first). */
export function logEvent(text: string, tone: 'good' | 'warn' | '' = ''): void {
  const item = document.createElement('li');
  if (tone) item.className = tone;
  const time = document.createElement('time');
  time.textContent = clock();
  item.append(time, text);
  const log = byId<HTMLOListElement>('log');
  log.prepend(item);
  while (log.children.length > 200) log.lastElementChild?.remove();
}
