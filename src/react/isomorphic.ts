// What differs between rendering in the browser and rendering on the server (or hydrating what
// the server rendered), where effects do not run.
import { useEffect, useLayoutEffect, useSyncExternalStore } from 'react';

/**
 * useLayoutEffect where there is a DOM, useEffect elsewhere: neither runs on the server, where
 * React 18.3 warns at each render of a component that has a layout effect.
 */
export const useIsomorphicLayoutEffect =
  typeof document === 'undefined' ? useEffect : useLayoutEffect;

const noSubscribe = () => (): void => undefined;
const inBrowser = (): boolean => false;
const onServer = (): boolean => true;

/**
 * True while rendering on the server and while hydrating (React reads the server snapshot
 * then), false in a render of the browser's own: what the first render shows must be what the
 * server rendered.
 */
export function useServerRender(): boolean {
  return useSyncExternalStore(noSubscribe, inBrowser, onServer);
}
