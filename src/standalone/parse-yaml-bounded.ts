// A YAML configuration file parsed into one document, refused at the first collection nested too
// deep. The yaml package's composer recurses once per level (a line of 100 000 `[` overflows the
// stack); its lexer and parser do not, and the parser's stack of open tokens is the nesting at
// each point, so they run first, and the composer is given their tokens only when within bound.
import { Composer, Lexer, Parser, YAMLParseError } from 'yaml';
import type { CST, Document } from 'yaml';

const collections = new Set(['block-map', 'block-seq', 'flow-collection']);

/**
 * `text` as one YAML document, its syntax errors in `errors` as the yaml package
 * reports them (a second document is an error too), keys not checked for uniqueness (see
 * duplicate-keys.ts); or the offset of the first collection (block mapping or sequence, flow
 * `{...}` or `[...]`) that opens a level past `maxNesting`, a document's outermost being level 1.
 */
export function parseYamlBounded(
  text: string,
  maxNesting: number,
): { document: Document.Parsed } | { tooDeepAt: number } {
  const parser = new Parser();
  const tokens: CST.Token[] = [];
  for (const lexeme of new Lexer().lex(text)) {
    for (const token of parser.next(lexeme)) tokens.push(token);
    // The stack holds the document, its open collections and at most one scalar.
    if (parser.stack.length <= maxNesting) continue;
    let level = 0;
    for (const token of parser.stack) {
      if (collections.has(token.type) && ++level > maxNesting) return { tooDeepAt: token.offset };
    }
  }
  for (const token of parser.end()) tokens.push(token);
  // logLevel error: the package's warnings (a key that is a list or a map, stringified) are not
  // printed on stderr; the checks name such a key, at its path in the file.
  const composer = new Composer({ uniqueKeys: false, logLevel: 'error' });
  let document: Document.Parsed | undefined;
  for (const next of composer.compose(tokens, true, text.length)) {
    if (document) {
      document.errors.push(
        new YAMLParseError(
          [next.range[0], next.range[1]],
          'MULTIPLE_DOCS',
          'a configuration file is one YAML document, and another starts here',
        ),
      );
      break;
    }
    document = next;
  }
  // compose(tokens, true) ends with a document, an empty one for an empty text.
  return { document: document! };
}
