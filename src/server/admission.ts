import type { TransportKind } from '../transport/transport.js';
import { addressGroup } from './address-group.js';
import type { UpgradeRequest } from './options.js';

export interface AdmissionLimits {
  maxConnections: number;
  maxConnectionsPerIp: number;
}

export interface Refusal {
  status: number;
  message: string;
  /** Why, for the rejected-upgrades metric and the log. */
  reason: 'origin' | 'capacity' | 'ip-limit';
  headers?: Record<string, string>;
}

/** Which Origins may open a WebSocket: a list of exact origins, or a predicate. */
export type OriginPolicy = readonly string[] | ((origin: string) => boolean);

/**
 * The key a connection counts under for the per-address limit (an IPv6 address counts by its
 * /64: see addressGroup). Pipes (stdio) have no address: a process serving many children's
 * pipes must not have them all share one "unknown" slot.
 */
function addressKey(
  transport: TransportKind,
  remoteAddress: string | undefined,
): string | undefined {
  if (transport === 'stdio') return undefined;
  return remoteAddress === undefined ? 'unknown' : addressGroup(remoteAddress);
}

/**
 * Who gets past the door before authentication runs: origin allow-list and
 * connection counts (total and per IP). A slot is held from admission until
 * the returned release function (socket closed or upgrade failed) or `release`
 * (session closed) is called.
 */
export class Admission {
  private total = 0;
  private readonly perIp = new Map<string, number>();

  constructor(
    private readonly limits: AdmissionLimits,
    private readonly origins: OriginPolicy | undefined,
  ) {}

  get connections(): number {
    return this.total;
  }

  admit(upgrade: UpgradeRequest): Refusal | (() => void) {
    const origin = upgrade.headers.origin;
    // Browsers always send Origin; programs that send none are not subject to the browser's rules.
    if (this.origins && origin !== undefined && !this.originAllowed(origin)) {
      return { status: 403, message: 'Origin not allowed', reason: 'origin' };
    }
    if (this.total >= this.limits.maxConnections) {
      return {
        status: 503,
        message: 'Too many connections',
        reason: 'capacity',
        headers: { 'Retry-After': '5' },
      };
    }
    const ip = addressKey(upgrade.transport, upgrade.remoteAddress);
    const fromIp = ip === undefined ? 0 : (this.perIp.get(ip) ?? 0);
    if (fromIp >= this.limits.maxConnectionsPerIp) {
      return {
        status: 429,
        message: 'Too many connections from this address',
        reason: 'ip-limit',
        headers: { 'Retry-After': '5' },
      };
    }
    this.total++;
    if (ip !== undefined) this.perIp.set(ip, fromIp + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.release(upgrade.transport, upgrade.remoteAddress);
    };
  }

  /**
   * Free the slot of a connection from `remoteAddress`. For a connection that became a session
   * the gateway calls this itself when the session closes (once), instead of keeping the
   * release closure and a 'close' listener alive for the whole life of every connection.
   */
  release(transport: TransportKind, remoteAddress: string | undefined): void {
    this.total--;
    const ip = addressKey(transport, remoteAddress);
    if (ip === undefined) return;
    const left = (this.perIp.get(ip) ?? 1) - 1;
    if (left > 0) this.perIp.set(ip, left);
    else this.perIp.delete(ip);
  }

  /** Whether cross-origin browsers may use HTTP POST from `origin`: only origins on an allow-list. */
  corsAllows(origin: string): boolean {
    return this.origins !== undefined && this.originAllowed(origin);
  }

  private originAllowed(origin: string): boolean {
    const policy = this.origins!;
    return typeof policy === 'function' ? policy(origin) : policy.includes(origin);
  }
}
