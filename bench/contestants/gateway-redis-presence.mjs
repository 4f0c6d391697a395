// The presence scenario on Redis: one gateway node on RedisBroker, "room" declared with
// presence. See gateway-presence.mjs.
import { presenceContestant } from './gateway-presence.mjs';

export default presenceContestant({
  id: 'gateway-redis-presence',
  name: 'gateway + presence, Redis',
  presence: true,
  redis: true,
});
