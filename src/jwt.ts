// "wsrpc-gateway/jwt": identity from JSON Web Tokens, verified with jose. It needs jose, an
// optional peer dependency of this package (`npm install jose`); the main entry never loads it.
export { jwtAuth } from './server/jwt/jwt-auth.js';
export type { JwtAuth } from './server/jwt/jwt-auth.js';
export { jwtDefaults } from './server/jwt/jwt-options.js';
export type { JwtAuthOptions, JwtClaimNames } from './server/jwt/jwt-options.js';
export type { JwtContext } from './server/jwt/claims-context.js';
export type { JwtAuthRequest } from './server/jwt/token-source.js';
