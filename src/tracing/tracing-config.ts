import { checkOptions, isRecord, ofType, refuse } from '../peer/option-rules.js';
import type { Rule } from '../peer/option-rules.js';

/** The `tracing` section of a configuration file, resolved. */
export interface TracingConfig {
  /** Spans are made through OpenTelemetry's API (`@opentelemetry/api` must be installed). */
  readonly enabled: boolean;
  /** The tracer's name (its instrumentation scope) the spans are made by. */
  readonly serviceName: string;
}

export const tracingDefaults: TracingConfig = Object.freeze({
  enabled: false,
  serviceName: 'wsrpc-gateway',
});

const nonEmpty: Rule = (value, name) => {
  if (typeof value !== 'string' || value.trim() === '') refuse(name, 'a non-empty string', value);
};

const rules: Readonly<Record<string, Rule>> = {
  enabled: ofType('boolean'),
  serviceName: nonEmpty,
};

/**
 * Check and resolve the `tracing` section (`{ enabled?, serviceName? }`); undefined when the
 * file has none (tracing off). A section present turns tracing on unless `enabled: false`.
 * `prefix` is its path in the file, for the messages.
 */
export function resolveTracingConfig(value: unknown, prefix = 'tracing'): TracingConfig {
  if (value === undefined) return tracingDefaults;
  if (!isRecord(value)) refuse(prefix, 'an object', value);
  const given = checkOptions(value, rules, `${prefix}.`, prefix);
  return Object.freeze({ ...tracingDefaults, enabled: true, ...given } as TracingConfig);
}
