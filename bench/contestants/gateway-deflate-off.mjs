// The baseline of the compression scenario: the same gateway without compression.
import { deflateGateway } from './gateway-deflate.mjs';

export default deflateGateway({
  id: 'gateway-deflate-off',
  name: 'gateway, uncompressed',
  perMessageDeflate: false,
});
