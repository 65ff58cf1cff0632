// Image references as operators write them (`pause:3.9`, `registry.k8s.io/pause:*`)
// compared with the names a runtime reports (`docker.io/library/pause:3.9`).

/**
 * The fully qualified form the runtimes report: a registry domain
 * (docker.io when the first component does not look like one), `library/`
 * for official Docker Hub images, and `:latest` when neither tag nor digest is given.
 */
export function normalizeImageRef(ref: string): string {
  if (ref.startsWith('sha256:')) return ref;
  let name = ref;
  const slash = name.indexOf('/');
  const first = slash === -1 ? '' : name.slice(0, slash);
  const hasDomain = first.includes('.') || first.includes(':') || first === 'localhost';
  if (!hasDomain) name = `docker.io/${slash === -1 ? `library/${name}` : name}`;
  const lastPart = name.slice(name.lastIndexOf('/') + 1);
  if (!lastPart.includes(':') && !name.includes('@')) name = `${name}:latest`;
  return name;
}

/**
 * A glob over a whole reference: `*` matches any run of characters (including
 * `/` and `:`), `?` one character; everything else literally.
 */
export function globToRegExp(glob: string): RegExp {
  let re = '';
  for (const ch of glob) {
    if (ch === '*') re += '.*';
    else if (ch === '?') re += '.';
    else re += ch.replace(/[.+^${}()|[\]\\/-]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/** Every name an image is known by: its ID, tags and digests (as reported and normalized). */
export function imageNames(image: {
  id: string;
  repoTags: string[];
  repoDigests: string[];
}): string[] {
  const names = new Set<string>([image.id]);
  for (const n of [...image.repoTags, ...image.repoDigests]) {
    names.add(n);
    names.add(normalizeImageRef(n));
  }
  return [...names];
}

export interface ImageMatcher {
  /** The first pattern matching one of the names, or undefined. */
  match(names: string[]): string | undefined;
}

const GLOB = /[*?]/;

/**
 * A --pinned-images pattern in the form the runtimes report names, so that
 * `hubkeep:*` protects `docker.io/library/hubkeep:1.0` as `hubkeep:1.0` would:
 * a pattern with no wildcard is normalised as a reference is; one whose first
 * component is literal gets the docker.io (and library/) prefix a reference
 * would, but no `:latest` (its wildcards decide the tag); one that starts with
 * a wildcard (`*\/critical/*`) or is an image ID is left as it is.
 */
export function normalizeImagePattern(pattern: string): string {
  if (!GLOB.test(pattern)) return normalizeImageRef(pattern);
  if (pattern.startsWith('sha256:')) return pattern;
  const slash = pattern.indexOf('/');
  const first = slash === -1 ? pattern : pattern.slice(0, slash);
  if (GLOB.test(first) && slash !== -1) return pattern;
  if (slash === -1) {
    // A bare repository (`hubkeep:*`, `pause*`): Docker Hub's library, unless it starts wild.
    return /^[*?]/.test(pattern) ? pattern : `docker.io/library/${pattern}`;
  }
  const hasDomain = first.includes('.') || first.includes(':') || first === 'localhost';
  return hasDomain ? pattern : `docker.io/${pattern}`;
}

/**
 * Each pattern matches a name as written and as normalised
 * (normalizeImagePattern); image names are compared in both forms too.
 */
export function globMatcher(patterns: string[]): ImageMatcher {
  const compiled = patterns.map((p) => {
    const normalized = normalizeImagePattern(p);
    const res = [globToRegExp(p)];
    if (normalized !== p) res.push(globToRegExp(normalized));
    return { pattern: p, re: { test: (n: string) => res.some((r) => r.test(n)) } };
  });
  return {
    match(names) {
      for (const { pattern, re } of compiled) if (names.some((n) => re.test(n))) return pattern;
      return undefined;
    },
  };
}
