// The browser's word that the network or the page is back. A reconnect waiting out its backoff
// would otherwise sleep through it (up to maxDelayMs, and a hidden tab's timers are throttled to
// once a minute), and a connection that died with the machine asleep would be found only at the
// next heartbeat.

interface Listening {
  addEventListener(type: string, listener: () => void): void;
  removeEventListener(type: string, listener: () => void): void;
}

interface Visible extends Listening {
  visibilityState?: string;
}

const listens = (target: unknown): target is Listening =>
  typeof (target as Listening | undefined)?.addEventListener === 'function';

/**
 * Calls `wake(true)` when the global scope (a page's window, a worker's scope) fires 'online'
 * and when a page's document becomes visible, `wake(false)` when it fires 'offline'. Where there
 * are no such events (Node), it listens to nothing. Returns what stops the listening.
 */
export function watchNetwork(wake: (online: boolean) => void): () => void {
  const scope: unknown = globalThis;
  const page = (globalThis as { document?: Visible }).document;
  const online = (): void => wake(true);
  const offline = (): void => wake(false);
  const visible = (): void => {
    if (page!.visibilityState === 'visible') wake(true);
  };
  const listen = (verb: 'addEventListener' | 'removeEventListener'): void => {
    if (listens(scope)) {
      scope[verb]('online', online);
      scope[verb]('offline', offline);
    }
    if (listens(page)) page[verb]('visibilitychange', visible);
  };
  listen('addEventListener');
  return () => listen('removeEventListener');
}
