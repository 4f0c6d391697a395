// The name the hooks (src/upstream-hooks/connect-hook.ts, subscribe-hook.ts) import the
// per-address share under: KeyedShares, keyed by address group.
export { KeyedShares as AddressShares } from './keyed-shares.js';
