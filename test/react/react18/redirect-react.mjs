// A module resolve hook: `react` and `react-dom` (and their subpaths), from wherever they are
// imported (the build in dist/ included), resolve to this folder's React 18, not the project's.
const here = new URL('./package.json', import.meta.url).href;

export async function resolve(specifier, context, next) {
  const react = /^react(-dom)?(\/|$)/.test(specifier);
  return next(specifier, react ? { ...context, parentURL: here } : context);
}
