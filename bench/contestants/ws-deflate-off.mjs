// The compression scenario's raw `ws` row without compression. See ws-deflate.mjs.
import { rawDeflate } from './ws-deflate.mjs';

export default rawDeflate({
  id: 'ws-deflate-off',
  name: 'raw ws, uncompressed',
  perMessageDeflate: false,
});
