// The SharedWorker script's one line: serve every tab that connects with one client.
import { createClientHost } from './host.js';
import type { ClientHost, ClientHostOptions } from './host.js';

/** What a SharedWorker's global scope fires for each tab that connects. */
interface ConnectScope {
  addEventListener(
    type: 'connect',
    listener: (event: { ports: readonly MessagePort[] }) => void,
  ): void;
}

/**
 * In a SharedWorker script: hold one connection for every tab of the origin that calls
 * `createSharedClient` with this script. `options` are createClient's, fixed here (code
 * options such as `WebSocket`, `encoding`, `middleware`, `logger` included); those not given
 * come from the first tab. dist/browser/shared-worker.js is `shareClient()`.
 */
export function shareClient(options: ClientHostOptions = {}): ClientHost {
  const host = createClientHost(options);
  (globalThis as unknown as ConnectScope).addEventListener('connect', (event) => {
    for (const port of event.ports) host.connect(port);
  });
  return host;
}
