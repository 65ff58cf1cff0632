// The CustomResourceDefinition the soak and the benchmarks create for their
// owner kinds: namespaced, schemaless (every field kept), served in the given
// versions with the first one stored. One manifest, so the soak's Widgets and
// Gadgets and the benchmark's Widgets cannot drift apart in shape.

export interface CrdNames {
  group: string;
  /** Lower-case plural, the resource's name in URLs. */
  plural: string;
  kind: string;
}

/** The manifest (plain JSON, for a raw POST) of `plural.group`, served in `versions`, the first stored. */
export function crdManifest(
  { group, plural, kind }: CrdNames,
  versions: readonly string[] = ['v1'],
): Record<string, unknown> {
  if (versions.length === 0) throw new Error(`crdManifest: ${plural}.${group} needs a version`);
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { plural, singular: kind.toLowerCase(), kind, listKind: `${kind}List` },
      versions: versions.map((name, i) => ({
        name,
        served: true,
        storage: i === 0,
        schema: {
          openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
        },
      })),
    },
  };
}
