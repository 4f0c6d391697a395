import { readFileSync } from 'node:fs';
import type { TlsOptions } from './options.js';

/**
 * The gateway's `tls` option from the environment: TLS_CERT_FILE and TLS_KEY_FILE (PEM
 * files), or TLS_CERT and TLS_KEY (the PEM text itself), and TLS_KEY_PASSPHRASE. Undefined
 * when neither is set (empty values count as unset); an error naming what is missing when only one of the pair is.
 */
export function tlsFromEnv(
  env: Record<string, string | undefined> = process.env,
): TlsOptions | undefined {
  const cert =
    env['TLS_CERT'] || (env['TLS_CERT_FILE'] && readFileSync(env['TLS_CERT_FILE'], 'utf8'));
  const key = env['TLS_KEY'] || (env['TLS_KEY_FILE'] && readFileSync(env['TLS_KEY_FILE'], 'utf8'));
  if (!cert && !key) return undefined;
  if (!cert || !key) {
    throw new Error(
      `TLS needs both a certificate and a key: set ${cert ? 'TLS_KEY_FILE (or TLS_KEY)' : 'TLS_CERT_FILE (or TLS_CERT)'} as well`,
    );
  }
  const passphrase = env['TLS_KEY_PASSPHRASE'];
  return passphrase ? { cert, key, passphrase } : { cert, key };
}
