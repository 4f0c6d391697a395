// The API report: every entry of package.json "exports", its public declarations as API Extractor
// sees them in the built .d.ts files, one Markdown file per entry in etc/. Run after `npm run build`.
//   node scripts/api-report.mjs          check: exits 1 and prints the difference when the built
//                                        surface differs from the committed report
//   node scripts/api-report.mjs --update write the report anew (commit it with the change)
// An entry whose types are another entry's (./client/browser: the bundle of ./client) gets a short
// report naming that entry and listing the bundle's runtime exports, which must equal the other's.
import { Extractor, ExtractorConfig } from '@microsoft/api-extractor';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as prettier from 'prettier';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const reportFolder = join(root, 'etc');
const update = process.argv.includes('--update');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

/** "." → wsrpc-gateway, "./client/browser" → wsrpc-gateway-client-browser. */
const reportName = (entry) =>
  [pkg.name, ...entry.split('/').filter((part) => part !== '.' && part !== '')].join('-');
const packageEntry = (entry) => (entry === '.' ? pkg.name : `${pkg.name}/${entry.slice(2)}`);

/** The .d.ts files are read as a consumer of the package would: NodeNext resolution. */
const compilerOptions = {
  target: 'ES2022',
  lib: ['ES2022', 'DOM'],
  module: 'NodeNext',
  moduleResolution: 'NodeNext',
  strict: true,
  skipLibCheck: true,
  types: ['node'],
};

/** API Extractor's report for one .d.ts entry point, written into `folder`. */
function extract(entry, typesPath, folder) {
  const name = reportName(entry);
  const config = ExtractorConfig.prepare({
    configObject: {
      projectFolder: root,
      mainEntryPointFilePath: join(root, typesPath),
      compiler: { overrideTsconfig: { compilerOptions, files: [join(root, typesPath)] } },
      apiReport: {
        enabled: true,
        reportFileName: name,
        reportFolder: folder,
        reportTempFolder: folder,
        includeForgottenExports: false,
      },
      docModel: { enabled: false },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      messages: {
        compilerMessageReporting: { default: { logLevel: 'error' } },
        // Declarations reached through an export but not exported by that entry are noted in the
        // report (ae-forgotten-export); release tags, links and doc comments are not its business.
        extractorMessageReporting: {
          default: { logLevel: 'none', addToApiReportFile: false },
          'ae-forgotten-export': { logLevel: 'none', addToApiReportFile: true },
        },
        tsdocMessageReporting: { default: { logLevel: 'none', addToApiReportFile: false } },
      },
    },
    configObjectFullPath: join(root, 'api-extractor.json'),
    packageJsonFullPath: join(root, 'package.json'),
  });
  const result = Extractor.invoke(config, {
    localBuild: true,
    showVerboseMessages: false,
    messageCallback: (message) => {
      // "Analysis will use the bundled TypeScript version": it bundles its own compiler.
      if (message.messageId === 'console-preamble') message.handled = true;
    },
  });
  if (!result.succeeded) throw new Error(`API Extractor failed on ${packageEntry(entry)}`);
  const file = join(folder, `${name}.api.md`);
  const text = readFileSync(file, 'utf8')
    .replace(/^## API Report File for "[^"]*"/m, `## API Report File for "${packageEntry(entry)}"`)
    .replace(/\r\n/g, '\n')
    // Whether a declaration has a doc comment is not part of the surface, and every one is public.
    .split('\n')
    .filter((line) => !/^\s*\/\/( @public)?( \(undocumented\))?$/.test(line))
    .filter((line) => line !== '// (No @packageDocumentation comment for this package)')
    .join('\n');
  return { name, text };
}

/** Names a module exports at run time, sorted. */
async function runtimeExports(path) {
  return Object.keys(await import(pathToFileURL(join(root, path)).href)).sort();
}

/** The short report of an entry that shares another entry's types. */
async function sharedTypesReport(entry, target, sameTypesAs) {
  const bundle = await runtimeExports(target.default);
  const original = await runtimeExports(sameTypesAs[1].default);
  if (bundle.join() !== original.join()) {
    throw new Error(
      `${packageEntry(entry)} (${target.default}) exports ${bundle.join(', ')}\n` +
        `but ${packageEntry(sameTypesAs[0])} (${sameTypesAs[1].default}) exports ${original.join(', ')}`,
    );
  }
  return {
    name: reportName(entry),
    text: [
      `## API Report File for "${packageEntry(entry)}"`,
      '',
      `Types: \`${target.types}\`, the same as \`${packageEntry(sameTypesAs[0])}\` (see ${reportName(sameTypesAs[0])}.api.md).`,
      `Runtime: \`${target.default}\`, one bundled ES module whose exports are the same as that entry's:`,
      '',
      '```ts',
      `export { ${bundle.join(', ')} };`,
      '```',
      '',
    ].join('\n'),
  };
}

// The module entries: the others (the shared worker's script, package.json) are files as they are.
const entries = Object.entries(pkg.exports).filter(([, target]) => typeof target === 'object');
const scratch = mkdtempSync(join(tmpdir(), 'api-report-'));
const reports = [];
try {
  for (const [index, [entry, target]] of entries.entries()) {
    if (!existsSync(join(root, target.types))) {
      throw new Error(`${target.types} is missing: run \`npm run build\` first`);
    }
    // The first entry with a given .d.ts gets the full report; the next ones refer to it.
    const sameTypesAs = entries.slice(0, index).find(([, other]) => other.types === target.types);
    if (sameTypesAs) {
      reports.push(await sharedTypesReport(entry, target, sameTypesAs));
    } else {
      reports.push(extract(entry, target.types, scratch));
    }
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

const prettierOptions = (await prettier.resolveConfig(join(reportFolder, 'x.md'))) ?? {};
let changed = 0;
mkdirSync(reportFolder, { recursive: true });
for (const { name, text } of reports) {
  const file = join(reportFolder, `${name}.api.md`);
  const formatted = await prettier.format(text, { ...prettierOptions, filepath: file });
  const committed = existsSync(file) ? readFileSync(file, 'utf8') : undefined;
  if (committed === formatted) continue;
  changed += 1;
  if (update) {
    writeFileSync(file, formatted);
    console.log(`api report: wrote ${join('etc', `${name}.api.md`)}`);
    continue;
  }
  const fresh = join(mkdtempSync(join(tmpdir(), 'api-report-')), `${name}.api.md`);
  writeFileSync(fresh, formatted);
  console.error(`\napi report: etc/${name}.api.md differs from the built package's surface:`);
  if (committed === undefined) console.error(formatted);
  else {
    const diff = spawnSync('git', ['diff', '--no-index', '--no-color', '--', file, fresh], {
      encoding: 'utf8',
    });
    console.error(diff.stdout || diff.stderr || `(compare ${file} with ${fresh})`);
  }
}
if (changed === 0) console.log(`api report: ${reports.length} entries match etc/*.api.md`);
else if (!update) {
  console.error(
    `api report: ${changed} of ${reports.length} entries changed. If the change is meant, run ` +
      '`npm run api:update` (it builds first) and commit etc/.',
  );
  process.exit(1);
}
