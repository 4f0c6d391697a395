import type { PerMessageDeflateOptions as WsDeflateOptions } from 'ws';
import { checkOptions, isRecord, numberIn, refuse } from '../peer/option-rules.js';
import type { Rule } from '../peer/option-rules.js';
import type { DeflateSettings } from '../transport/deflate-frames.js';

/** The `perMessageDeflate` option's object form. */
export interface PerMessageDeflateOptions {
  /** Frames smaller than this many bytes are sent uncompressed. Default 1024. */
  threshold?: number;
  /** zlib compression level, 0 (none) to 9 (smallest, slowest). Default 6 (zlib's default). */
  level?: number;
  /**
   * zlib memLevel, 1 to 9: lower is less memory and less compression. Each socket that has
   * compressed a message keeps its deflate state for its life: about 240 KiB at the default 8,
   * 205 KiB at 1 (measured on Node 20; the 32 KiB window and its tables are there at any level).
   */
  memLevel?: number;
}

export const deflateDefaults: DeflateSettings = Object.freeze({
  threshold: 1024,
  level: 6,
  memLevel: 8,
});

const deflateRules: Readonly<Record<keyof PerMessageDeflateOptions, Rule>> = {
  threshold: numberIn(0, 2 ** 31 - 1, true, ' (bytes; 0: compress every frame)'),
  level: numberIn(0, 9, true),
  memLevel: numberIn(1, 9, true),
};

/** The option's rule: `true`, `false` or an object of the keys above (checked by `resolveDeflate`). */
export const perMessageDeflateRule: Rule = (value, name) => {
  if (typeof value !== 'boolean' && !isRecord(value)) {
    refuse(name, 'a boolean or an object { threshold, level, memLevel }', value);
  }
};

/** `perMessageDeflate` resolved: undefined when compression is off (the default). */
export function resolveDeflate(value: unknown): DeflateSettings | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return deflateDefaults;
  const given = checkOptions(
    value,
    deflateRules,
    'perMessageDeflate.',
    'perMessageDeflate',
  ) as PerMessageDeflateOptions;
  return Object.freeze({ ...deflateDefaults, ...given });
}

/**
 * What `ws` is told: no context takeover either way, so every message is compressed (and
 * inflated) on its own, which is what lets one compressed broadcast serve every socket and
 * keeps a connection's compression from carrying history between messages.
 */
export function wsDeflateOptions(settings: DeflateSettings | undefined): WsDeflateOptions | false {
  if (settings === undefined) return false;
  return {
    serverNoContextTakeover: true,
    clientNoContextTakeover: true,
    threshold: settings.threshold,
    // ws sets the window itself: the one negotiated, or 15 (SHARED_WINDOW_BITS).
    zlibDeflateOptions: { level: settings.level, memLevel: settings.memLevel },
  };
}
