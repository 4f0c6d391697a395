// What the React tests share: a gateway that counts the methods it is called with, a Node
// client (the `ws` WebSocket: happy-dom's is not used), and rendering under a ClientProvider.
import { render } from '@testing-library/react';
import type { RenderResult } from '@testing-library/react';
import { createElement } from 'react';
import type { ReactNode } from 'react';
import type { RpcClient } from '../../src/client/client.js';
import type { Middleware } from '../../src/peer/middleware.js';
import { ClientProvider } from '../../src/react/index.js';
import type { Session } from '../../src/server/session.js';

/** Every method the gateway is called with, in order (subscribe and unsubscribe included). */
export function methodLog(): {
  seen: string[];
  count: (method: string) => number;
  middleware: Middleware<Session<unknown>>[];
} {
  const seen: string[] = [];
  return {
    seen,
    count: (method) => seen.filter((m) => m === method).length,
    middleware: [
      (ctx, next) => {
        seen.push(ctx.method);
        return next();
      },
    ],
  };
}

/** `ui` under a provider of `client`; `strict`: inside StrictMode (double render and effects). */
export function renderWith(client: RpcClient, ui: ReactNode, strict = false): RenderResult {
  return render(createElement(ClientProvider, { client }, ui), { reactStrictMode: strict });
}

/** Each distinct value `read` gives on successive renders, in order. */
export function recorder<T>(): { values: T[]; record: (value: T) => void } {
  const values: T[] = [];
  return {
    values,
    record: (value) => {
      if (values.length === 0 || values[values.length - 1] !== value) values.push(value);
    },
  };
}
