// The demo's settings, read from its environment variables and checked before anything starts:
// a value that is not usable is refused naming its variable, rather than failing later with a
// stack trace, naming an option the user never set, or (a number that is not one) meaning 0.
import { resolveGatewayOptions, tlsFromEnv } from '../src/index.js';
import type { TlsOptions } from '../src/index.js';
import { cut } from '../src/peer/option-rules.js';
import { brokerEnv } from '../src/server/broker-from-env.js';
import { logLevelOf } from '../src/server/logger.js';

/** The longest delay a Node timer takes (2^31 - 1 ms, about 24.8 days). */
const MAX_DELAY_MS = 2 ** 31 - 1;

export interface DemoSettings {
  /** STDIO=1: one connection on stdin/stdout, the log on stderr. */
  readonly stdio: boolean;
  /** LOG_LEVEL, default info. */
  readonly logLevel: string;
  /** HOST, default 127.0.0.1. */
  readonly host: string;
  /** PORT, default 8080. */
  readonly port: number;
  /** TCP_PORT: NDJSON over TCP (TLS with the TLS variables); none by default. */
  readonly tcpPort: number | undefined;
  /** DRAIN_DEADLINE_MS, default 10 000. */
  readonly drainDeadlineMs: number;
  /** DEMO_TOKEN_TTL_MS, default 20 000. */
  readonly tokenTtlMs: number;
  /** TICK_MS, default 500. */
  readonly tickMs: number;
  /** TRUSTED_PROXIES, comma-separated addresses or subnets; none by default. */
  readonly trustedProxies: readonly string[];
  /** TLS_CERT_FILE + TLS_KEY_FILE (or TLS_CERT + TLS_KEY), TLS_KEY_PASSPHRASE. */
  readonly tls: TlsOptions | undefined;
}

/**
 * The settings `env` gives, each checked; an empty variable is unset. Throws an error whose
 * message names the variable and what it may be (the broker's variables as brokerFromEnv
 * checks them, the TLS ones as tlsFromEnv reads them).
 */
export function demoSettings(env: Readonly<Record<string, string | undefined>>): DemoSettings {
  const logLevel = logLevelOf(env['LOG_LEVEL']);
  brokerEnv(env);
  const trustedProxies = (env['TRUSTED_PROXIES'] ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  checkTrustedProxies(trustedProxies);
  const tcpPort = env['TCP_PORT'] ? integer(env, 'TCP_PORT', 0, 0, 65_535) : undefined;
  return {
    stdio: env['STDIO'] === '1',
    logLevel,
    host: env['HOST'] || '127.0.0.1',
    port: integer(env, 'PORT', 8080, 0, 65_535),
    tcpPort,
    drainDeadlineMs: integer(env, 'DRAIN_DEADLINE_MS', 10_000, 0, MAX_DELAY_MS),
    tokenTtlMs: integer(env, 'DEMO_TOKEN_TTL_MS', 20_000, 1, MAX_DELAY_MS),
    tickMs: integer(env, 'TICK_MS', 500, 1, MAX_DELAY_MS),
    trustedProxies,
    tls: tlsFromEnv({ ...env }),
  };
}

/** The variable `name` as a whole number in [min, max] (decimal digits only), or `fallback`. */
function integer(
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const text = env[name];
  if (text === undefined || text === '') return fallback;
  const value = /^\s*\d+\s*$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new RangeError(
      `${name} must be an integer from ${min} to ${max}, not ${JSON.stringify(cut(text))}`,
    );
  }
  return value;
}

/** Checked by the gateway's own rule, its message naming the variable rather than the option. */
function checkTrustedProxies(trustedProxies: readonly string[]): void {
  try {
    resolveGatewayOptions({ trustedProxies });
  } catch (err) {
    const message = (err as Error).message;
    throw new TypeError(
      message.startsWith('trustedProxies')
        ? `TRUSTED_PROXIES${message.slice('trustedProxies'.length)}`
        : `TRUSTED_PROXIES: ${message}`,
      { cause: err },
    );
  }
}
