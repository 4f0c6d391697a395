// wsrpc-gateway/client/shared: one connection for every tab of an origin, held by a
// SharedWorker. The tab's side (createSharedClient) and the worker's (shareClient,
// createClientHost); a bundler keeps only the side a script uses.
export { SharedRpcClient, createSharedClient } from './shared-client.js';
export type { SharedCallOptions } from './shared-client.js';
export type { SharedClientOptions, SharedWorkerLike, ForwardedOptions } from './options.js';
export type { GetToken, TokenRequest } from '../client-options.js';
export { shareClient } from './share-client.js';
export { createClientHost } from './host.js';
export type { ClientHost, ClientHostOptions } from './host.js';
