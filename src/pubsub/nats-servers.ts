/**
 * NATS server URLs as operators write them, credentials included (`nats://user:pass@host:4222`,
 * `nats://token@host:4222`, the NATS CLI's forms), turned into what the NATS client takes: it
 * does not read credentials from a server URL (it connects without them and the server refuses
 * it, "Authorization Violation"), so they are taken out of the URLs and given as its `user` and
 * `pass`, or `token`. The URLs it gets, and so any error naming one, carry no secret.
 */
/** The schemes of a NATS server URL this project takes (NATS_URL, a NATS upstream's `url`). */
export const NATS_URL_SCHEME = /^(nats|tls|wss?):\/\//i;

export interface NatsServerOptions {
  servers: string[];
  user?: string;
  pass?: string;
  token?: string;
}

/** The credentials a caller may also give as options, which URL credentials must not contradict. */
export interface NatsGivenCredentials {
  user?: unknown;
  pass?: unknown;
  token?: unknown;
  authenticator?: unknown;
}

/**
 * `servers` without credentials, and the credentials they carried. Throws a TypeError (the
 * message names no secret) when two URLs carry different credentials, or when the URLs carry
 * credentials and `given` (the connection options) has its own: which to use would be a guess.
 */
export function natsServerOptions(
  servers: string | readonly string[],
  given: NatsGivenCredentials = {},
): NatsServerOptions {
  const list = typeof servers === 'string' ? servers.split(',') : [...servers];
  let credentials: { user: string; pass: string | undefined } | undefined;
  const plain = list.map((entry) => {
    const server = entry.trim();
    const parsed = credentialsOf(server);
    if (!parsed) return server;
    if (
      credentials &&
      (credentials.user !== parsed.credentials.user || credentials.pass !== parsed.credentials.pass)
    ) {
      throw new TypeError('The NATS server URLs carry different credentials');
    }
    credentials = parsed.credentials;
    return parsed.server;
  });
  if (!credentials) return { servers: plain };
  const { user, pass, token, authenticator } = given;
  if (user !== undefined || pass !== undefined || token !== undefined || authenticator) {
    throw new TypeError(
      'NATS credentials are given both in a server URL and in the connection options: give them in one place',
    );
  }
  return credentials.pass === undefined
    ? { servers: plain, token: credentials.user }
    : { servers: plain, user: credentials.user, pass: credentials.pass };
}

/** The URL without its credentials, and the credentials (percent-decoded), when it has any. */
function credentialsOf(
  server: string,
): { server: string; credentials: { user: string; pass: string | undefined } } | undefined {
  // host:port without a scheme is a form the NATS client takes; it has no credentials.
  if (!server.includes('://') || !URL.canParse(server)) return undefined;
  const url = new URL(server);
  if (url.username === '' && url.password === '') return undefined;
  // `nats://user:@host` has a user and an empty password: kept apart from a token by the colon.
  const userInfo = server.slice(server.indexOf('://') + 3, server.lastIndexOf('@'));
  const hasPassword = userInfo.includes(':');
  const credentials = {
    user: decodeURIComponent(url.username),
    pass: hasPassword ? decodeURIComponent(url.password) : undefined,
  };
  url.username = '';
  url.password = '';
  return { server: url.toString().replace(/\/$/, ''), credentials };
}
