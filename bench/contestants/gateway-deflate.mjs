// The compression scenario (bench/deflate-scenario.mjs): this gateway as in gateway.mjs, with
// `perMessageDeflate: true` (each broadcast compressed once for every subscriber that
// negotiated it) or, for the baseline, without it. Its subscribers offer permessage-deflate.
import { gatewayContestant } from './gateway.mjs';

export function deflateGateway({ id, name, perMessageDeflate }) {
  return gatewayContestant({
    id,
    name,
    only: 'deflate',
    client: { deflate: true },
    options: { perMessageDeflate },
  });
}

export default deflateGateway({
  id: 'gateway-deflate',
  name: 'gateway, deflate once per broadcast',
  perMessageDeflate: true,
});
