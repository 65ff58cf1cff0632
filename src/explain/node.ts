// `kubegc explain node/NAME`, from an operator's kubectl context: the disk of
// one node as its kubegc agent finds it now (disk-report.ts). The agent's
// /debug/disk is reached through the API server's pod proxy, which
// authenticates the caller and checks `get pods/proxy`, then removes the
// caller's credentials: so the CLI also mints a 10-minute token of the
// ServiceAccount kubegc-node-explain (TokenRequest, `create
// serviceaccounts/token` on that one account) and sends it in
// X-Kubegc-Authorization, which the agent checks as it checks /metrics
// callers (TokenReview, then a SubjectAccessReview of get /debug/disk).
// The ClusterRole kubegc-node-explainer grants exactly those three; a caller
// without it is refused by the API server.
import type { KubeClient } from '../api/client.ts';
import { ApiError, isObjectNotFound } from '../api/errors.ts';
import { fieldEquals } from '../api/field-selector.ts';
import {
  DISK_REPORT_PATH,
  DISK_REPORT_SCHEMA_VERSION,
  type DiskReport,
} from '../node/disk-report.ts';
import { PROXIED_AUTHORIZATION_HEADER } from '../shared/serving/server.ts';
import { ExplainError } from './explain.ts';

export interface NodeExplainOptions {
  /** Where the node agents run (kubegc-system). */
  namespace: string;
  /** The ServiceAccount whose token the agent accepts for /debug/disk. */
  serviceAccount: string;
  /** The agents' pods. */
  selector: string;
}

export const NODE_EXPLAIN_DEFAULTS: NodeExplainOptions = {
  namespace: 'kubegc-system',
  serviceAccount: 'kubegc-node-explain',
  selector: 'app.kubernetes.io/name=kubegc-node',
};

/** What the operator must be granted, said in every refusal. */
const GRANT = (ns: string): string =>
  `bind the ClusterRole kubegc-node-explainer in ${ns} to yourself (kubectl -n ${ns} create rolebinding NAME --clusterrole=kubegc-node-explainer --user=YOU; docs/node-gc.md)`;

const TOKEN_SECONDS = 600;

async function mintToken(client: KubeClient, o: NodeExplainOptions): Promise<string> {
  try {
    const res = await client.request<{ status?: { token?: string } }>(
      'POST',
      `/api/v1/namespaces/${encodeURIComponent(o.namespace)}/serviceaccounts/${encodeURIComponent(o.serviceAccount)}/token`,
      {
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: { expirationSeconds: TOKEN_SECONDS },
        },
      },
    );
    const token = res.status?.token;
    if (!token) throw new ExplainError('the API server returned a TokenRequest without a token');
    return token;
  } catch (err) {
    if (err instanceof ApiError && err.status === 403)
      throw new ExplainError(
        `you may not ask the node agent (no create on serviceaccounts/token for ${o.namespace}/${o.serviceAccount}): ${GRANT(o.namespace)}`,
      );
    if (isObjectNotFound(err, o.serviceAccount))
      throw new ExplainError(
        `no ServiceAccount ${o.namespace}/${o.serviceAccount}: is kubegc's node agent installed there (deploy/node, or the Helm chart with node.enabled)?`,
      );
    throw err;
  }
}

interface AgentPod {
  name: string;
  port: number;
}

interface PodList {
  items?: {
    metadata?: { name?: string };
    status?: { phase?: string };
    spec?: { containers?: { ports?: { name?: string; containerPort?: number }[] }[] };
  }[];
}

async function agentPod(
  client: KubeClient,
  nodeName: string,
  o: NodeExplainOptions,
): Promise<AgentPod> {
  let list: PodList;
  try {
    list = await client.request<PodList>(
      'GET',
      `/api/v1/namespaces/${encodeURIComponent(o.namespace)}/pods`,
      {
        query: { labelSelector: o.selector, fieldSelector: fieldEquals('spec.nodeName', nodeName) },
        verb: 'LIST',
      },
    );
  } catch (err) {
    if (err instanceof ApiError && err.status === 403)
      throw new ExplainError(
        `you may not list the node agents' pods in ${o.namespace}: ${GRANT(o.namespace)}`,
      );
    throw err;
  }
  const running = (list.items ?? []).filter((p) => p.status?.phase === 'Running');
  const pod = running[0];
  const name = pod?.metadata?.name;
  if (!pod || !name)
    throw new ExplainError(
      `no running kubegc node agent on node ${nodeName} (pods in ${o.namespace} with ${o.selector}: ${list.items?.length ?? 0}, none Running)`,
    );
  const port = (pod.spec?.containers ?? [])
    .flatMap((c) => c.ports ?? [])
    .find((p) => p.name === 'metrics')?.containerPort;
  return { name, port: port ?? 8443 };
}

/** The node's disk as its agent explains it now. */
export async function explainNode(
  client: KubeClient,
  nodeName: string,
  o: NodeExplainOptions = NODE_EXPLAIN_DEFAULTS,
): Promise<DiskReport> {
  const [token, pod] = await Promise.all([mintToken(client, o), agentPod(client, nodeName, o)]);
  const path = `/api/v1/namespaces/${encodeURIComponent(o.namespace)}/pods/https:${encodeURIComponent(pod.name)}:${pod.port}/proxy${DISK_REPORT_PATH}`;
  let report: DiskReport;
  try {
    report = await client.request<DiskReport>('GET', path, {
      headers: { [PROXIED_AUTHORIZATION_HEADER]: `Bearer ${token}` },
      timeoutMs: 30_000,
    });
  } catch (err) {
    if (err instanceof ApiError && err.status === 403)
      throw new ExplainError(
        `refused (${err.message}): the API server needs get on pods/proxy in ${o.namespace}, the agent get on ${DISK_REPORT_PATH} for ${o.serviceAccount}: ${GRANT(o.namespace)}`,
      );
    if (err instanceof ApiError)
      throw new ExplainError(`the node agent ${o.namespace}/${pod.name} answered: ${err.message}`);
    throw err;
  }
  if (report.schemaVersion !== DISK_REPORT_SCHEMA_VERSION)
    throw new ExplainError(
      `the node agent ${o.namespace}/${pod.name} answered schema version ${String(report.schemaVersion)}; this kubegc reads ${DISK_REPORT_SCHEMA_VERSION} (use the same kubegc version as the agent)`,
    );
  return report;
}
