import type { Plugin } from 'esbuild';

/** The shared client's per-tab fallback, a dynamic import, resolved as loaded on demand. */
export declare const fallbackOnDemand: Plugin;
