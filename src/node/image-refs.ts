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

export function globMatcher(patterns: string[]): ImageMatcher {
  const compiled = patterns.map((p) => ({ pattern: p, re: globToRegExp(p) }));
  return {
    match(names) {
      for (const { pattern, re } of compiled) if (names.some((n) => re.test(n))) return pattern;
      return undefined;
    },
  };
}
