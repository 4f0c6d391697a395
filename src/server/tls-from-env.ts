import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import type { SecureContextOptions } from 'node:tls';
import { cut } from '../peer/option-rules.js';
import type { TlsOptions } from './options.js';

/**
 * The gateway's `tls` option from the environment: TLS_CERT_FILE and TLS_KEY_FILE (PEM
 * files), or TLS_CERT and TLS_KEY (the PEM text itself), and TLS_KEY_PASSPHRASE. Undefined
 * when neither is set (empty values count as unset); an error naming what is missing when only
 * one of the pair is. Each is tried as what it should be, so an error names the variable: a
 * file that cannot be read, a certificate or key that is not PEM, a wrong passphrase, a key
 * that is not the certificate's.
 */
export function tlsFromEnv(
  env: Record<string, string | undefined> = process.env,
): TlsOptions | undefined {
  const cert = pemOf(env, 'TLS_CERT');
  const key = pemOf(env, 'TLS_KEY');
  if (!cert && !key) return undefined;
  if (!cert || !key) {
    throw new Error(
      `TLS needs both a certificate and a key: set ${cert ? 'TLS_KEY_FILE (or TLS_KEY)' : 'TLS_CERT_FILE (or TLS_CERT)'} as well`,
    );
  }
  const passphrase = env['TLS_KEY_PASSPHRASE'] || undefined;
  usable(`${cert.from} is not a usable PEM certificate`, { cert: cert.text });
  usable(
    `${key.from} is not a usable PEM private key${passphrase ? ' with TLS_KEY_PASSPHRASE' : ''}`,
    { key: key.text, passphrase },
  );
  usable(`${key.from} is not the key of the certificate of ${cert.from}`, {
    cert: cert.text,
    key: key.text,
    passphrase,
  });
  return passphrase
    ? { cert: cert.text, key: key.text, passphrase }
    : { cert: cert.text, key: key.text };
}

/** `name` (the PEM text) or `name_FILE` (read), and which variable gave it; undefined: neither. */
function pemOf(
  env: Record<string, string | undefined>,
  name: string,
): { text: string; from: string } | undefined {
  const text = env[name];
  if (text) return { text, from: name };
  const file = env[`${name}_FILE`];
  if (!file) return undefined;
  try {
    return { text: readFileSync(file, 'utf8'), from: `${name}_FILE` };
  } catch (err) {
    throw new Error(`${name}_FILE: cannot read ${cut(file)}: ${cut((err as Error).message)}`, {
      cause: err,
    });
  }
}

/** Throw `refusal` with the TLS library's reason when `options` make no secure context. */
function usable(refusal: string, options: SecureContextOptions): void {
  try {
    createSecureContext(options);
  } catch (err) {
    throw new Error(`${refusal}: ${cut((err as Error).message)}`, { cause: err });
  }
}
