// The baseline of the presence scenario on the MemoryBroker: the same gateway and topic
// without presence. See gateway-presence.mjs.
import { presenceContestant } from './gateway-presence.mjs';

export default presenceContestant({
  id: 'gateway-presence-off',
  name: 'gateway, no presence, memory',
  presence: false,
});
