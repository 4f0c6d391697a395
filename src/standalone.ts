// "wsrpc-gateway/standalone": the gateway run from a configuration file (what
// `wsrpc-gateway serve --config FILE` does), for programs that start it themselves.
export { loadConfigFile, ConfigFileError } from './standalone/config-file.js';
export {
  examineStandaloneConfig,
  resolveStandaloneConfig,
} from './standalone/standalone-config.js';
export type { ConfigExamination, StandaloneConfig } from './standalone/standalone-config.js';
export type {
  BrokerConfig,
  ListenConfig,
  ShutdownConfig,
  StaticConfig,
  TlsFilesConfig,
  TopicConfig,
} from './standalone/sections.js';
export type { OwnerSections } from './standalone/owner-sections.js';
export { serve, tlsFileProblem } from './standalone/serve.js';
export { staticDirProblem } from './standalone/static-files.js';
export { summarizeStandaloneConfig } from './standalone/summary.js';
export { configWarnings } from './standalone/config-warnings.js';
export type { ServeOptions, StandaloneServer } from './standalone/serve.js';
export { shutdownOnSignals } from './standalone/shutdown-signals.js';
export type { ShutdownOnSignals } from './standalone/shutdown-signals.js';
