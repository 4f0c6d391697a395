// Every relative link in the README and docs/ reaches a file of the repository, and every
// `#anchor` into a Markdown page names one of its headings (as GitHub makes their anchors):
// a page moved or a heading renamed is found here, not by a reader.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** The API reference `npm run docs:api` writes (typedoc.json's `out`), not kept in the repository. */
const generated = join(
  root,
  (JSON.parse(readFileSync(join(root, 'typedoc.json'), 'utf8')) as { out: string }).out,
);

function markdownUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return markdownUnder(path);
    return name.endsWith('.md') ? [path] : [];
  });
}

/** GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`. */
function anchorOf(heading: string): string {
  return heading
    .replace(/`/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\- _]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a page's headings (outside code blocks), numbered as GitHub numbers repeats. */
function anchorsOf(file: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = anchorOf(heading[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Each `[text](target)` of a page, code blocks and inline code left out. */
function linksOf(file: string): string[] {
  const text = readFileSync(file, 'utf8')
    .replace(/^(```|~~~)[\s\S]*?^\1/gm, '')
    .replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!);
}

const pages = [join(root, 'README.md'), ...markdownUnder(join(root, 'docs'))];

describe('links of the README and docs/', () => {
  it.each(pages.map((page) => [relative(root, page), page]))('%s', (_name, page) => {
    const broken: string[] = [];
    for (const link of linksOf(page)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // https:, mailto:
      const [path, anchor] = link.split('#', 2) as [string, string | undefined];
      const target = path === '' ? page : resolve(dirname(page), decodeURIComponent(path));
      if (target.startsWith(generated + '/')) continue;
      if (!existsSync(target)) {
        broken.push(`${link}: no such file`);
        continue;
      }
      if (anchor && target.endsWith('.md') && !anchorsOf(target).has(anchor)) {
        broken.push(`${link}: no such heading`);
      }
    }
    expect(broken).toEqual([]);
  });
});
