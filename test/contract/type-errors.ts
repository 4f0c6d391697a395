import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/*
 * For what `@ts-expect-error` cannot say: the text of a type error, or that a snippet has
 * none. Each call builds a TypeScript program: seconds, not milliseconds.
 */

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');

/** Type errors of `source` (`"line: message"`), checked as if it were a file in test/contract/. */
export function typeErrors(source: string): string[] {
  const configPath = join(root, 'tsconfig.json');
  const config = ts.readConfigFile(configPath, (p) => ts.sys.readFile(p));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  const file = join(here, '__snippet__.ts');
  const host = ts.createCompilerHost(parsed.options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, languageVersion, ...rest) =>
    name === file
      ? ts.createSourceFile(name, source, languageVersion)
      : getSourceFile(name, languageVersion, ...rest);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => name === file || fileExists(name);
  const program = ts.createProgram([file], { ...parsed.options, noEmit: true }, host);
  return ts.getPreEmitDiagnostics(program, program.getSourceFile(file)).map((d) => {
    const line =
      d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line : -1;
    return `${line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}
