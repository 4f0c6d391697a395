import { createContext, createElement, useContext, useEffect, useRef, useState } from 'react';
import type { ReactNode } from 'react';
import { createClient } from '../client/client.js';
import type { ClientOptions, RpcClient } from '../client/client.js';
import { useServerRender } from './isomorphic.js';

/**
 * The nearest provider's client; null for a provider given `options` whose client is not made
 * yet (rendering on the server, hydrating); undefined without a provider.
 */
const ClientContext = createContext<RpcClient | null | undefined>(undefined);

export type ClientProviderProps = { children?: ReactNode } & (
  | {
      /** A client made elsewhere: the provider neither opens nor closes it. */
      client: RpcClient;
      options?: undefined;
    }
  | {
      /**
       * The provider makes a client from these on mount and closes it on unmount. Read once:
       * to connect with other options, remount the provider (give it a new `key`).
       */
      options: ClientOptions;
      client?: undefined;
    }
);

/** A client the provider made, and the close it will do unless a remount keeps it. */
interface Owned {
  client: RpcClient;
  closing?: ReturnType<typeof setTimeout> | undefined;
}

/**
 * The client made from `options` once the provider mounts (undefined before, and always on the
 * server), closed a macrotask after it unmounts unless it mounts again meanwhile. A passive
 * effect: React runs layout-effect cleanups when a Suspense fallback hides shown content, which
 * would close the connection for as long as the fallback shows; passive ones run on unmount
 * (and StrictMode's remount, which the deferred close lets keep the client).
 */
function useOwnedClient(options: ClientOptions | undefined): RpcClient | undefined {
  const owned = useRef<Owned | undefined>(undefined);
  const [made, setMade] = useState<RpcClient | undefined>(undefined);
  useEffect(() => {
    if (!options) return undefined;
    let held = owned.current;
    if (held) clearTimeout(held.closing);
    else held = owned.current = { client: createClient(options) };
    const kept = held;
    setMade(kept.client);
    return () => {
      kept.closing = setTimeout(() => {
        if (owned.current === kept) owned.current = undefined;
        void kept.client.close();
      }, 0);
    };
  }, [owned, options]);
  return made;
}

/**
 * The client its descendants' hooks use: the one given (`client`), or one made from `options`
 * when the provider mounts and closed when it unmounts. StrictMode's unmount and remount in one
 * commit keeps the client it made (one connection), and so does a Suspense fallback hiding it.
 * Its children render once that client exists; on the server, and while hydrating, they render
 * at once, their hooks showing `loading` and `connecting`, and no client is made there.
 */
export function ClientProvider(props: ClientProviderProps): ReactNode {
  const [options] = useState(props.client ? undefined : props.options);
  const made = useOwnedClient(options);
  const early = useServerRender();
  // Children rendered while hydrating stay rendered until the client exists: React 18 renders
  // the end of hydration (no longer early) before the effect's client lands, and returning null
  // there would unmount what the server sent and mount it again from scratch.
  const [renderedEarly] = useState(early);
  const client = props.client ?? made;
  if (!client && !early && !renderedEarly) return null;
  return createElement(ClientContext.Provider, { value: client ?? null }, props.children);
}

/**
 * The provider's client for the hooks: undefined while a provider given `options` has not made
 * it yet (server rendering, hydration), when the hooks show their state before any call.
 */
export function useProvidedClient(): RpcClient | undefined {
  const client = useContext(ClientContext);
  if (client === undefined) throw new Error('useClient: no <ClientProvider> above this component');
  return client ?? undefined;
}

/**
 * The client of the nearest `ClientProvider`; throws without one, and while rendering on the
 * server or hydrating under a provider given `options` (its client is made once it mounts).
 */
export function useClient(): RpcClient {
  const client = useProvidedClient();
  if (!client) {
    throw new Error(
      'useClient: the <ClientProvider options> client is made once it mounts, not on the server',
    );
  }
  return client;
}
