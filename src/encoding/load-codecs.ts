import type { EncodingName, WireCodec } from './codec.js';
import { subprotocolOf, withValueCap } from './codec.js';

const packageOf: Record<WireCodec['name'], string> = { msgpack: 'msgpackr', cbor: 'cbor-x' };

async function importCodec(name: WireCodec['name']): Promise<WireCodec> {
  try {
    // Loaded only when enabled: the packages are optional peer dependencies.
    return name === 'msgpack'
      ? (await import('../msgpack.js')).msgpack
      : (await import('../cbor.js')).cbor;
  } catch (err) {
    throw new Error(
      `encodings: '${name}' needs the package ${packageOf[name]} (npm install ${packageOf[name]}): ${(err as Error).message}`,
      { cause: err },
    );
  }
}

/**
 * The binary codecs of `encodings`, by subprotocol (JSON needs none), each reading frames of
 * at most `maxJsonValues` values (the gateway's limits.maxJsonValues; default none).
 */
export async function loadCodecs(
  encodings: readonly EncodingName[],
  maxJsonValues = Infinity,
): Promise<ReadonlyMap<string, WireCodec>> {
  const codecs = new Map<string, WireCodec>();
  for (const name of encodings) {
    if (name === 'json') continue;
    const codec = await importCodec(name);
    codecs.set(
      subprotocolOf(name),
      maxJsonValues === Infinity ? codec : withValueCap(codec, maxJsonValues),
    );
  }
  return codecs;
}
