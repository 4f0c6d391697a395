// What a configuration allows but almost never means: warned of, not refused, since a setup may
// mean it. The gateway logs each warning when it is made (so serve does at start); check-config
// prints each and still passes.
import { everyPeerWarnings } from '../server/client-address.js';
import type { StandaloneConfig } from './standalone-config.js';

/** The warnings of a resolved configuration, each one line. */
export function configWarnings(config: Pick<StandaloneConfig, 'gateway'>): string[] {
  return everyPeerWarnings(config.gateway.trustedProxies ?? []);
}
