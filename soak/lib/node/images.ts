// The node soak's images and every spelling the API accepts for each (issue
// 33): the workload names an image in a seeded spelling, and the oracle maps
// a spelling (or a name containerd reports) back to the image through this
// table, built from how the image was pushed, never through kubegc's own
// normalisation. Pure (unit-tested).
import { REGISTRY_HOST } from '../../../cluster/registry.ts';

export type ImageRole =
  /** Run by the workload's pods. */
  | 'app'
  /** Pulled once by a pod, then only pinned by a --pinned-images pattern. */
  | 'pinned'
  /** Imported straight into containerd, never used: what GC may take. */
  | 'filler';

export interface SoakImage {
  /** Short unique key, e.g. `app-3`. */
  key: string;
  role: ImageRole;
  /** Where it is pushed: `docker.io` (the node's registry serves Docker Hub) or the registry's host:port. */
  domain: 'docker.io' | typeof REGISTRY_HOST;
  /** The repository path on that domain: `library/soak-app-3`, `soakorg/app-4`, `soak/app-5`. */
  path: string;
  tag: string;
  /** The manifest digest once pushed (`sha256:…`). */
  digest?: string;
  /** The image ID (config digest) once built. */
  id?: string;
}

/** The name the runtime reports as its tag: `docker.io/library/soak-app-3:1`. */
export function canonicalName(img: SoakImage): string {
  return `${img.domain}/${img.path}:${img.tag}`;
}

/** The name the runtime reports as its digest: `docker.io/library/soak-app-3@sha256:…`. */
export function canonicalDigest(img: SoakImage): string | undefined {
  return img.digest ? `${img.domain}/${img.path}@${img.digest}` : undefined;
}

/**
 * Every way a pod may name `img`, as distribution's reference grammar allows
 * and containerd resolves it: Docker Hub's short forms (no domain, no
 * `library/`, `index.docker.io`), the tag omitted for `latest`, a digest alone
 * or after a tag (the digest wins).
 */
export function spellings(img: SoakImage): string[] {
  const out = new Set<string>();
  const repos: string[] = [];
  if (img.domain === 'docker.io') {
    const [first, ...rest] = img.path.split('/');
    const official = first === 'library' && rest.length === 1;
    const short = official ? (rest[0] as string) : img.path;
    repos.push(short, `docker.io/${short}`, `index.docker.io/${img.path}`, `docker.io/${img.path}`);
    if (official) repos.push(img.path, `index.docker.io/${short}`);
  } else {
    repos.push(`${img.domain}/${img.path}`);
  }
  for (const r of repos) {
    out.add(`${r}:${img.tag}`);
    if (img.tag === 'latest') out.add(r);
    if (img.digest) {
      out.add(`${r}@${img.digest}`);
      out.add(`${r}:${img.tag}@${img.digest}`);
    }
  }
  return [...out];
}

/**
 * --pinned-images patterns for `img`, each meant to pin it (and, for the
 * wildcard ones, other tags of its repository): short and long forms, a tag
 * glob, the repository alone (any tag, as the docs promise for a name without
 * a tag is not assumed: `:latest` is what a bare name means, so the bare form
 * is only used for `latest` images).
 */
export function pinSpellings(img: SoakImage): string[] {
  return spellings(img)
    .filter((s) => !s.includes('@'))
    .flatMap((s) => [s, s.replace(new RegExp(`:${img.tag}$`), ':*')]);
}

/** Which image each spelling and each reported name belongs to. */
export class ImageTable {
  private readonly byName = new Map<string, SoakImage>();
  readonly images: SoakImage[] = [];

  add(img: SoakImage): void {
    this.images.push(img);
    for (const s of spellings(img)) this.byName.set(s, img);
    this.byName.set(canonicalName(img), img);
    const d = canonicalDigest(img);
    if (d) this.byName.set(d, img);
    if (img.id) this.byName.set(img.id, img);
  }

  /** The image a pod's spelling or a runtime name (tag, digest or ID) stands for. */
  resolve(name: string): SoakImage | undefined {
    return this.byName.get(name);
  }

  byKey(key: string): SoakImage | undefined {
    return this.images.find((i) => i.key === key);
  }
}
