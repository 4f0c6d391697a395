// `node --import ./register.mjs script.mjs`: the script's React is this folder's React 18.
import { register } from 'node:module';

register('./redirect-react.mjs', import.meta.url);
