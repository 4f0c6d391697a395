// The shared client's per-tab fallback (its host, the worker's side run in the tab) is a dynamic
// import: resolved as external, a tab's bundle is measured as a bundler that splits code ships it,
// the fallback loaded only where SharedWorker is missing. Used by scripts/bundle-client.mjs and
// test/client/bundle-size.test.ts.
export const fallbackOnDemand = {
  name: 'fallback-on-demand',
  setup(b) {
    b.onResolve({ filter: /\/host\.js$/, namespace: 'file' }, (args) =>
      args.kind === 'dynamic-import' ? { path: args.path, external: true } : undefined,
    );
  },
};
