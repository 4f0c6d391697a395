// One line saying what a valid configuration file sets up (check-config prints it after "ok").
import type { StandaloneConfig } from './standalone-config.js';

export function summarizeStandaloneConfig(config: StandaloneConfig): string {
  const { host, port, tcpPort } = config.listen;
  const count = (n: number, what: string): string => `${n} ${what}${n === 1 ? '' : 's'}`;
  const parts = [
    `listens on ${host}:${port}${tcpPort === undefined ? '' : ` and TCP ${tcpPort}`}${config.tls ? ' with TLS' : ''}`,
    `path ${config.gateway.path ?? '/rpc'}`,
    `broker ${config.broker.kind}`,
    count(Object.keys(config.topics).length, 'topic'),
    `identity ${config.jwt ? 'jwt' : config.hooks?.connect ? 'connect hook' : 'none'}`,
  ];
  if (config.upstreams) {
    parts.push(
      `${count(config.upstreams.upstreams.size, 'upstream')} (${count(config.upstreams.routes.length, 'route')})`,
    );
  }
  if (config.serverApi) {
    const api = config.serverApi;
    const where = api.path ?? (api.listen && `${api.listen.host}:${api.listen.port}`);
    parts.push(`server API at ${where}`);
  }
  const hooks = (['connect', 'subscribe', 'events'] as const).filter(
    (hook) => config.hooks?.[hook],
  );
  if (hooks.length > 0) parts.push(`hooks: ${hooks.join(', ')}`);
  parts.push(`tracing ${config.tracing.enabled ? 'on' : 'off'}`);
  if (config.static) parts.push(`static files from ${config.static.dir}`);
  return parts.join(', ');
}
