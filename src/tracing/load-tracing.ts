import type { OpenTelemetryApi } from './open-telemetry.js';
import { openTelemetryTracing } from './open-telemetry.js';
import type { TracingConfig } from './tracing-config.js';
import { noTracing } from './tracing.js';
import type { Tracing } from './tracing.js';

/**
 * The tracing a configuration asks for: `noTracing` when it is off (OpenTelemetry is not
 * loaded at all), else spans through `@opentelemetry/api`, imported here and only here. That
 * package is an optional peer dependency: when it is missing the error says to install it.
 */
export async function loadTracing(
  config: Pick<TracingConfig, 'enabled'> & Partial<TracingConfig>,
): Promise<Tracing> {
  if (!config.enabled) return noTracing;
  let api: OpenTelemetryApi;
  try {
    api = await import('@opentelemetry/api');
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    throw new Error(
      'tracing.enabled needs @opentelemetry/api, an optional peer dependency of wsrpc-gateway: npm install @opentelemetry/api (and an OpenTelemetry SDK to export the spans)',
      { cause: err },
    );
  }
  return openTelemetryTracing(api, config.serviceName ?? 'wsrpc-gateway');
}
