// `serve --config FILE` and `check-config FILE`: the gateway itself, run from a configuration file
// (the standalone server). The standalone module (yaml, undici) is imported only by these two
// commands, so `wsrpc call` and the others start without it.
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import type { Output } from './errors.js';

export const gatewayCommandNames = ['serve', 'check-config'] as const;
export type GatewayCommandName = (typeof gatewayCommandNames)[number];

export function isGatewayCommand(name: string | undefined): name is GatewayCommandName {
  return (gatewayCommandNames as readonly string[]).includes(name ?? '');
}

/** Exit codes of serve and check-config (also listed in the help text). */
export const GatewayExitCode = {
  Success: 0,
  /** The configuration has problems (each printed), or the server could not start. */
  Invalid: 1,
  /** The file cannot be read or parsed (with its line and column), or the command line is wrong. */
  Unreadable: 2,
} as const;

export const gatewayCommandsHelp = `Usage:
  wsrpc-gateway serve --config FILE   Run the gateway from a configuration file (YAML or JSON;
                                      also WSRPC_CONFIG=FILE); SIGTERM, SIGINT or SIGHUP drains
                                      and exits 0
  wsrpc-gateway check-config FILE     Check a configuration file: print every problem with its
                                      path in the file (exit 1), or "ok" and a summary (exit 0)

Exit codes (serve, check-config):
  0  ok (serve: drained and stopped)
  1  the configuration has problems, or the server could not start
  2  the file cannot be read or parsed (with line:column), or wrong arguments`;

interface Io {
  readonly stdout: Output;
  readonly stderr: Output;
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** Run `serve` or `check-config`; serve resolves only when it could not start. */
export async function runGatewayCommand(argv: readonly string[], io: Io): Promise<number> {
  const [command] = argv as [GatewayCommandName, ...string[]];
  let parsed;
  try {
    parsed = parseArgs({
      args: argv.slice(1),
      options: { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    return usage(io, command, (err as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.stdout.write(`${gatewayCommandsHelp}\n`);
    return GatewayExitCode.Success;
  }
  if (command === 'check-config') {
    if (positionals.length !== 1 || values.config !== undefined) {
      return usage(io, command, 'check-config takes one FILE: wsrpc-gateway check-config FILE');
    }
    return checkConfig(positionals[0]!, io);
  }
  const file = values.config ?? io.env['WSRPC_CONFIG'];
  if (positionals.length > 0 || file === undefined || file === '') {
    return usage(io, command, 'serve needs --config FILE (or WSRPC_CONFIG=FILE)');
  }
  return serveFile(file, io);
}

function usage(io: Io, command: string, message: string): number {
  io.stderr.write(
    `wsrpc-gateway ${command}: ${message}\nRun 'wsrpc-gateway ${command} --help' for usage.\n`,
  );
  return GatewayExitCode.Unreadable;
}

/** The file's value, or the exit code after printing why it could not be loaded. */
async function load(file: string, io: Io): Promise<{ value: unknown } | { code: number }> {
  const { loadConfigFile, ConfigFileError } = await import('../standalone.js');
  try {
    return { value: await loadConfigFile(file, io.env) };
  } catch (err) {
    if (!(err instanceof ConfigFileError)) throw err;
    io.stderr.write(`${err.message}\n`);
    return { code: err.kind === 'env' ? GatewayExitCode.Invalid : GatewayExitCode.Unreadable };
  }
}

/**
 * The level serve logs at (LOG_LEVEL), or undefined after printing why LOG_LEVEL is none: serve
 * refuses to start with it, and check-config reports it the same way.
 */
async function logLevel(command: GatewayCommandName, io: Io): Promise<string | undefined> {
  const { logLevelOf } = await import('../server/logger.js');
  try {
    return logLevelOf(io.env['LOG_LEVEL']);
  } catch (err) {
    io.stderr.write(`wsrpc-gateway ${command}: ${(err as Error).message}\n`);
    return undefined;
  }
}

async function checkConfig(file: string, io: Io): Promise<number> {
  const loaded = await load(file, io);
  if ('code' in loaded) return loaded.code;
  // Told before the file's problems, and the file still checked: one run lists them all.
  const level = await logLevel('check-config', io);
  const {
    configWarnings,
    examineStandaloneConfig,
    summarizeStandaloneConfig,
    staticDirProblem,
    tlsFileProblem,
  } = await import('../standalone.js');
  const examined = examineStandaloneConfig(loaded.value, file);
  const { config } = examined;
  // The TLS files and static.dir are read as serve reads them: what it would refuse is a
  // problem here too, in its words.
  const fileProblems = config
    ? [tlsFileProblem(config, dirname(file)), staticDirProblem(config, dirname(file))]
    : [];
  const problems = [
    ...examined.problems.map((problem) => problem.message),
    ...fileProblems.filter((problem) => problem !== undefined),
  ];
  if (!config || problems.length > 0) {
    for (const problem of problems) io.stderr.write(`${file}: ${problem}\n`);
    const count = problems.length === 1 ? '1 problem' : `${problems.length} problems`;
    io.stderr.write(`${file}: ${count}\n`);
    return GatewayExitCode.Invalid;
  }
  if (level === undefined) return GatewayExitCode.Invalid;
  // What serve would log as a warning at start: told, and the file still passes.
  for (const warning of configWarnings(config)) io.stderr.write(`${file}: warning: ${warning}\n`);
  io.stdout.write(`ok: ${file}: ${summarizeStandaloneConfig(config)}\n`);
  return GatewayExitCode.Success;
}

async function serveFile(file: string, io: Io): Promise<number> {
  const loaded = await load(file, io);
  if ('code' in loaded) return loaded.code;
  const { examineStandaloneConfig, serve, shutdownOnSignals } = await import('../standalone.js');
  const { createLogger } = await import('../server/logger.js');
  const { config, problems } = examineStandaloneConfig(loaded.value, file);
  if (!config) {
    for (const problem of problems) io.stderr.write(`${file}: ${problem.message}\n`);
    return GatewayExitCode.Invalid;
  }
  // LOG_LEVEL that is not a level: a configuration problem, told as one (exit 1).
  const level = await logLevel('serve', io);
  if (level === undefined) return GatewayExitCode.Invalid;
  const logger = createLogger({ level });
  let server;
  try {
    server = await serve(config, { logger, baseDir: dirname(file) });
  } catch (err) {
    logger.error({ err }, 'could not start the gateway');
    logger.flush();
    return GatewayExitCode.Invalid;
  }
  const running = server;
  shutdownOnSignals(logger, () => running.close());
  // The process ends in the signal handler, once drained.
  return new Promise<number>(() => undefined);
}
