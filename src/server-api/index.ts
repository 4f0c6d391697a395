// The server API for backends (gateway mode): see docs/gateway-mode.md.
export { resolveServerApiConfig, serverApiDefaults } from './config.js';
export type { ServerApiConfig, ServerApiConsume, ServerApiListen } from './config.js';
export { startServerApi } from './server-api.js';
export type { ServerApi, ServerApiConsumerStatus, ServerApiDeps } from './server-api.js';
export type { ApiCaller } from './auth.js';
