// Field selectors built from names. A name is only checked to be a valid path
// segment for many kinds (RBAC's Role, ClusterRole, RoleBinding and
// ClusterRoleBinding among them), so it may hold `,` `=` and `\`, which the
// API server's field selector parser reads as syntax: `reader,writer` is then
// a malformed selector (400), and `x,metadata.name!=x` a valid one that
// matches nothing. Escaped as k8s.io/apimachinery/pkg/fields EscapeValue does.

/** `\` → `\\`, `,` → `\,`, `=` → `\=` (apimachinery's fields.EscapeValue), in one pass. */
export function escapeFieldSelectorValue(value: string): string {
  return value.replace(/[\\,=]/g, (c) => `\\${c}`);
}

/** `field=value`, the value escaped (apimachinery's fields.OneTermEqualSelector(...).String()). */
export function fieldEquals(field: string, value: string): string {
  return `${field}=${escapeFieldSelectorValue(value)}`;
}
