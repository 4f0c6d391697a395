// The baseline of the presence scenario on Redis: the same gateway node on RedisBroker and the
// same topic without presence. See gateway-presence.mjs.
import { presenceContestant } from './gateway-presence.mjs';

export default presenceContestant({
  id: 'gateway-redis-presence-off',
  name: 'gateway, no presence, Redis',
  presence: false,
  redis: true,
});
