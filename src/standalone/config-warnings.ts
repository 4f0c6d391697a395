// What a configuration allows but almost never means: warned of, not refused, since a setup may
// mean it (a gateway reached only through proxies, on a network nothing else can reach). serve
// logs each warning at start; check-config prints each and still passes.
import { cut } from '../peer/option-rules.js';
import type { StandaloneConfig } from './standalone-config.js';

/** The warnings of a resolved configuration, each one line. */
export function configWarnings(config: Pick<StandaloneConfig, 'gateway'>): string[] {
  return (config.gateway.trustedProxies ?? [])
    .filter(trustsEveryPeer)
    .map(
      (entry) =>
        `trustedProxies: "${cut(entry)}" trusts every peer's X-Forwarded-For, so any client can claim any address (per-address limits, rate buckets, logs); list the proxies' own addresses or subnets`,
    );
}

/** A subnet of prefix length 0 (`0.0.0.0/0`, `::/0`): every address of its family. */
function trustsEveryPeer(entry: string): boolean {
  const slash = entry.indexOf('/');
  return slash >= 0 && /^0{1,3}$/.test(entry.slice(slash + 1).trim());
}
