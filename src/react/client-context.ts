import { createContext, createElement, useContext, useLayoutEffect, useRef, useState } from 'react';
import type { ReactNode } from 'react';
import { createClient } from '../client/client.js';
import type { ClientOptions, RpcClient } from '../client/client.js';

const ClientContext = createContext<RpcClient | undefined>(undefined);

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
 * The client its descendants' hooks use: the one given (`client`), or one made from `options`
 * when the provider mounts and closed when it unmounts. StrictMode's unmount and remount in one
 * commit keeps the client it made (one connection); its children render once it exists.
 */
export function ClientProvider(props: ClientProviderProps): ReactNode {
  const given = props.client;
  const options = useRef(props.options).current;
  const owned = useRef<Owned | undefined>(undefined);
  const [made, setMade] = useState<RpcClient | undefined>(undefined);
  useLayoutEffect(() => {
    if (given || !options) return undefined;
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
  }, [given, options]);
  const client = given ?? made;
  if (!client) return null;
  return createElement(ClientContext.Provider, { value: client }, props.children);
}

/** The client of the nearest `ClientProvider`; throws without one. */
export function useClient(): RpcClient {
  const client = useContext(ClientContext);
  if (!client) throw new Error('useClient: no <ClientProvider> above this component');
  return client;
}
