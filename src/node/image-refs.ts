// Image references as pods and operators write them (`nginx:1.25`,
// `docker.io/nginx`, `nginx:1.25@sha256:…`, `registry.k8s.io/pause:*`)
// compared with the names a runtime reports (`docker.io/library/nginx:1.25`,
// `docker.io/library/nginx@sha256:…`). Both sides are compared after the
// normalisation of distribution's reference package (ParseNormalizedNamed,
// then ParseDockerRef), which containerd's and CRI-O's CRI apply to a pod's
// image before they look it up: a spelling that does not normalise to one of
// an image's names is an image the runtime would not use for that pod.

const DEFAULT_DOMAIN = 'docker.io';
/** Docker Hub's old name; the runtimes store its images under docker.io. */
const LEGACY_DEFAULT_DOMAIN = 'index.docker.io';
const OFFICIAL_REPO_PREFIX = 'library/';
const DEFAULT_TAG = 'latest';
/** distribution's NameTotalLengthMax: domain and path together. */
const NAME_MAX = 255;

// distribution's grammar (reference/regexp.go), with IPv6 hosts as in v3.
const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?`;
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const REFERENCE = new RegExp(
  `^(?:(${DOMAIN})/)?(${PATH_COMPONENT}(?:/${PATH_COMPONENT})*)(?::(${TAG}))?(?:@(${DIGEST}))?$`,
);
/** Hex lengths of the digest algorithms go-digest knows; others are refused. */
const DIGEST_HEX_LENGTH: Record<string, number> = { sha256: 64, sha384: 96, sha512: 128 };
/** An image ID as containerd (sha256:…) or CRI-O (bare hex) reports it. */
const IMAGE_ID = /^(?:sha256:)?[a-f0-9]{64}$/;

export interface ImageReference {
  /** The registry, port included: docker.io for Docker Hub. */
  domain: string;
  /** The repository below the registry: library/nginx. */
  path: string;
  tag?: string;
  /** algorithm:hex; with it, the tag does not decide which image is meant. */
  digest?: string;
}

export class InvalidImageReferenceError extends Error {}

/** An image ID (`sha256:<64 hex>`, or the bare hex CRI-O reports), not a reference. */
export function isImageId(ref: string): boolean {
  return IMAGE_ID.test(ref);
}

/**
 * Splits off the registry as distribution's splitDockerDomain does: the first
 * component is one when it has a `.` or `:`, is `localhost`, or has an
 * upper-case letter (which a repository path may not); otherwise the name is
 * on docker.io. `index.docker.io` is docker.io, and a one-component path on
 * docker.io is an official image under `library/`.
 */
function splitDomain(name: string): { domain: string; remainder: string } {
  const slash = name.indexOf('/');
  const first = slash === -1 ? '' : name.slice(0, slash);
  const isDomain =
    slash !== -1 && (/[.:]/.test(first) || first === 'localhost' || first.toLowerCase() !== first);
  let domain = isDomain ? first : DEFAULT_DOMAIN;
  let remainder = isDomain ? name.slice(slash + 1) : name;
  if (domain === LEGACY_DEFAULT_DOMAIN) domain = DEFAULT_DOMAIN;
  if (domain === DEFAULT_DOMAIN && !remainder.includes('/'))
    remainder = `${OFFICIAL_REPO_PREFIX}${remainder}`;
  return { domain, remainder };
}

/**
 * Parses a reference as the runtimes do (ParseNormalizedNamed), or throws
 * InvalidImageReferenceError saying why no runtime would accept it.
 */
export function parseImageReference(ref: string): ImageReference {
  return parse(ref, true);
}

/** With `digestLength` false, a digest's hex may have any length (a glob's wildcard may stand for part of it). */
function parse(ref: string, digestLength: boolean): ImageReference {
  const invalid = (why: string): InvalidImageReferenceError =>
    new InvalidImageReferenceError(`invalid image reference "${ref}": ${why}`);
  if (ref === '') throw invalid('empty');
  if (/^[a-f0-9]{64}$/.test(ref))
    throw invalid('a 64-digit hex string is an image ID, not a repository name');
  const { domain, remainder } = splitDomain(ref);
  const colon = remainder.indexOf(':');
  const repository = colon === -1 ? remainder : remainder.slice(0, colon);
  if (repository.toLowerCase() !== repository)
    throw invalid(`the repository name (${repository}) must be lowercase`);
  const m = REFERENCE.exec(`${domain}/${remainder}`);
  if (!m) throw invalid('not [registry[:port]/]repository[:tag][@algorithm:digest]');
  const [, parsedDomain = '', path = '', tag, digest] = m;
  if (parsedDomain.length + 1 + path.length > NAME_MAX)
    throw invalid(`the name is longer than ${NAME_MAX} characters`);
  if (digest !== undefined && digestLength) {
    const [algorithm = '', hex = ''] = digest.split(':');
    const length = DIGEST_HEX_LENGTH[algorithm];
    if (length === undefined) throw invalid(`unsupported digest algorithm ${algorithm}`);
    if (!new RegExp(`^[a-f0-9]{${length}}$`).test(hex))
      throw invalid(`a ${algorithm} digest is ${length} lowercase hex digits`);
  }
  return {
    domain: parsedDomain,
    path,
    ...(tag !== undefined ? { tag } : {}),
    ...(digest !== undefined ? { digest } : {}),
  };
}

/**
 * The names a spelling can stand for, runtime form: the image the runtime
 * would resolve it to (ParseDockerRef: `@digest` when a digest is given, else
 * `:tag`, `:latest` without either) first, then — for tag and digest together —
 * the tagged name too, so that an image known only by that tag still matches
 * (protection errs on the side of keeping).
 */
function referenceForms(r: ImageReference): string[] {
  const name = `${r.domain}/${r.path}`;
  if (r.digest === undefined) return [`${name}:${r.tag ?? DEFAULT_TAG}`];
  return r.tag === undefined
    ? [`${name}@${r.digest}`]
    : [`${name}@${r.digest}`, `${name}:${r.tag}`];
}

/** The normalised forms of a reference (referenceForms), or undefined for an image ID or a string no runtime accepts. */
function normalizedForms(ref: string): string[] | undefined {
  if (isImageId(ref)) return undefined;
  try {
    return referenceForms(parseImageReference(ref));
  } catch (err) {
    if (err instanceof InvalidImageReferenceError) return undefined;
    throw err;
  }
}

/**
 * The fully qualified name the runtimes would resolve a reference to
 * (`nginx:1.25@sha256:X` → `docker.io/library/nginx@sha256:X`). Image IDs, and
 * strings no runtime accepts as a reference, come back unchanged: they match
 * nothing but themselves.
 */
export function normalizeImageRef(ref: string): string {
  return normalizedForms(ref)?.[0] ?? ref;
}

/**
 * Every name under which a reference matches an image's names: as written,
 * then its normalised forms (normalizeImageRef first, and the tagged name of
 * a tag+digest reference).
 */
export function imageRefNames(ref: string): string[] {
  return [...new Set([ref, ...(normalizedForms(ref) ?? [])])];
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
  for (const n of [...image.repoTags, ...image.repoDigests])
    for (const form of imageRefNames(n)) names.add(form);
  return [...names];
}

export interface ImageMatcher {
  /** The first pattern matching one of the names, or undefined. */
  match(names: string[]): string | undefined;
}

const GLOB = /[*?]/;

/**
 * A --pinned-images pattern in the forms the runtimes report names, so that a
 * pattern matches whatever spelling of the same reference would: a pattern
 * without wildcards is a reference (imageRefNames); one with wildcards whose
 * first component is literal gets the registry, `library/` and tag-or-digest
 * treatment a reference would, except `:latest` (its wildcards decide the
 * tag); one whose registry part is wild (`*\/critical/*`, `*pause*`) or that
 * is an image ID is left as it is. The pattern as written comes first.
 */
export function imagePatternForms(pattern: string): string[] {
  if (!GLOB.test(pattern)) return imageRefNames(pattern);
  if (pattern.startsWith('sha256:')) return [pattern];
  const slash = pattern.indexOf('/');
  if (slash === -1 ? /^[*?]/.test(pattern) : GLOB.test(pattern.slice(0, slash))) return [pattern];
  const { domain, remainder } = splitDomain(pattern);
  // Tag and digest as in a reference: the digest after the last `@`, the tag
  // after a `:` in the last path component before it.
  const at = remainder.lastIndexOf('@');
  const named = at === -1 ? remainder : remainder.slice(0, at);
  const colon = named.lastIndexOf(':');
  const hasTag = colon > named.lastIndexOf('/');
  const repository = hasTag ? named.slice(0, colon) : named;
  const forms = [pattern];
  if (at !== -1) forms.push(`${domain}/${repository}${remainder.slice(at)}`);
  if (at === -1 || hasTag) forms.push(`${domain}/${named}`);
  return [...new Set(forms)];
}

/**
 * Each pattern matches a name in any of its forms (imagePatternForms); image
 * names are compared in every form too (imageNames).
 */
export function globMatcher(patterns: string[]): ImageMatcher {
  const compiled = patterns.map((p) => {
    const res = imagePatternForms(p).map(globToRegExp);
    return { pattern: p, test: (n: string) => res.some((r) => r.test(n)) };
  });
  return {
    match(names) {
      for (const { pattern, test } of compiled) if (names.some(test)) return pattern;
      return undefined;
    },
  };
}

// What a wildcard is tried as when looking for any name a glob could match:
// nothing, a name character, a path, a digest's hex, and for `?` the
// punctuation of a reference.
const STAR_SAMPLES = ['', 'a', 'a/a', '0'.repeat(64)];
const QUESTION_SAMPLES = ['a', '0', '/', ':', '@', '.', '-', '_'];
/** Beyond this many combinations the search is not worth it: the pattern is accepted. */
const MAX_SAMPLES = 4096;

function isReference(candidate: string): boolean {
  try {
    parse(candidate, false);
    return true;
  } catch (err) {
    if (err instanceof InvalidImageReferenceError) return false;
    throw err;
  }
}

/** Whether some expansion of the glob's wildcards from the samples is an image ID or a valid reference. */
function globCanMatch(pattern: string): boolean {
  const parts = pattern.split(/([*?])/);
  const choices = parts.map((p, i) =>
    i % 2 === 0 ? [p] : p === '*' ? STAR_SAMPLES : QUESTION_SAMPLES,
  );
  if (choices.reduce((n, c) => n * c.length, 1) > MAX_SAMPLES) return true;
  const expand = (i: number, prefix: string): boolean => {
    if (i === choices.length) return isImageId(prefix) || isReference(prefix);
    return (choices[i] ?? []).some((c) => expand(i + 1, prefix + c));
  };
  // An image ID pattern (`sha256:0123*`): its wildcards stand for hex digits.
  const id = /^(?:sha256:)?([a-f0-9*?]*)$/.exec(pattern)?.[1];
  if (id !== undefined) {
    const fixed = id.replace(/\*/g, '').length;
    if (id.includes('*') ? fixed <= 64 : fixed === 64) return true;
  }
  return expand(0, '');
}

export interface ImagePatternProblem {
  message: string;
  /**
   * True for a pattern without wildcards, which is checked exactly; a glob is
   * checked by trying its wildcards as a few typical expansions, which can miss.
   */
  certain: boolean;
}

/**
 * Why a --pinned-images pattern can never match an image, or undefined:
 * without wildcards it must be an image ID or a reference the runtimes accept
 * (the reason is distribution's); with wildcards, some name must fit it.
 */
export function imagePatternProblem(pattern: string): ImagePatternProblem | undefined {
  if (!GLOB.test(pattern)) {
    if (isImageId(pattern)) return undefined;
    try {
      parseImageReference(pattern);
      return undefined;
    } catch (err) {
      if (!(err instanceof InvalidImageReferenceError)) throw err;
      return { message: `"${pattern}" can never match an image: ${err.message}`, certain: true };
    }
  }
  if (globCanMatch(pattern)) return undefined;
  return {
    message: `"${pattern}" seems to match no image: no image ID or valid reference fits it (repository paths are lowercase: [registry[:port]/]repository[:tag][@algorithm:digest])`,
    certain: false,
  };
}
