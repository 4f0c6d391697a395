import { useCallback, useSyncExternalStore } from 'react';
import type { DisconnectEvent } from '../client/authentication.js';
import type { RpcClient } from '../client/client.js';
import type { ConnectionState } from '../client/connection-state.js';
import { useProvidedClient } from './client-context.js';

/** Where the client's connection stands, and why the last one (or attempt) ended. */
export interface ConnectionSnapshot {
  state: ConnectionState;
  /** Close code, reason, HTTP status where known, error, whether it dials again (`disconnects$`). */
  lastDisconnect: DisconnectEvent | undefined;
}

/** Before the provider has made its client (on the server, while hydrating). */
const NOT_YET: ConnectionSnapshot = { state: 'connecting', lastDisconnect: undefined };
const noUnsubscribe = (): void => undefined;

/** The snapshot last handed out per client: the same object while nothing changed. */
const snapshots = new WeakMap<RpcClient, ConnectionSnapshot>();

function snapshotOf(client: RpcClient): ConnectionSnapshot {
  const { state, lastDisconnect } = client;
  const last = snapshots.get(client);
  if (last && last.state === state && last.lastDisconnect === lastDisconnect) return last;
  const next = { state, lastDisconnect };
  snapshots.set(client, next);
  return next;
}

/**
 * The provider's client's connection state (`state$`) and its last disconnect
 * (`disconnects$`), re-rendering on each change.
 */
export function useConnectionState(): ConnectionSnapshot {
  const client = useProvidedClient();
  const subscribe = useCallback(
    (onChange: () => void) => {
      if (!client) return noUnsubscribe;
      const states = client.state$.subscribe(onChange);
      const ends = client.disconnects$.subscribe(onChange);
      return () => {
        states.unsubscribe();
        ends.unsubscribe();
      };
    },
    [client],
  );
  const get = useCallback(() => (client ? snapshotOf(client) : NOT_YET), [client]);
  return useSyncExternalStore(subscribe, get, get);
}
