/**
 * Scope selection for tracing: globs over dotted scope paths (`tb.hca0.mkey_cache*`). `*`
 * matches any run of characters (dots included), `?` one character. A scope is selected when a
 * glob matches it or one of its ancestors, so `tb.hca0` selects the whole adapter.
 */
export function globToRegExp(glob: string): RegExp {
  let re = '^';
  for (const ch of glob) {
    if (ch === '*') re += '.*';
    else if (ch === '?') re += '.';
    else re += ch.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(re + '$');
}

/** A predicate over scope paths for a list of globs (empty list: everything). */
export function scopeSelector(globs: readonly string[] | undefined): (scope: string) => boolean {
  if (!globs || globs.length === 0) return () => true;
  const res = globs.map(globToRegExp);
  return (scope: string): boolean => {
    // the scope itself or any ancestor
    let s = scope;
    for (;;) {
      if (res.some((r) => r.test(s))) return true;
      const dot = s.lastIndexOf('.');
      if (dot < 0) return false;
      s = s.slice(0, dot);
    }
  };
}
