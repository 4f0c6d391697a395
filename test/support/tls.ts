import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCertificate {
  /** PEM text. */
  cert: string;
  key: string;
  /** The files the PEM text came from (for CLIs and NODE_EXTRA_CA_CERTS). */
  certFile: string;
  keyFile: string;
  /** Delete the files. */
  remove(): void;
}

/**
 * A fresh self-signed certificate for localhost and 127.0.0.1, made with the openssl CLI
 * (Debian's, always present), valid for one day.
 */
export function makeSelfSignedCertificate(): TestCertificate {
  const dir = mkdtempSync(join(tmpdir(), 'wsrpc-tls-'));
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  return {
    cert: readFileSync(certFile, 'utf8'),
    key: readFileSync(keyFile, 'utf8'),
    certFile,
    keyFile,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
