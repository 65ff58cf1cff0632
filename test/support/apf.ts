// The APF squeeze: a PriorityLevelConfiguration with no queue (Reject) and a
// FlowSchema that puts chosen users' requests in it, ahead of every default
// schema but `exempt` and `probes`, so that the API server itself answers
// them 429. Used by the e2e tests (the client-node helpers below) and by the
// soak's squeeze-429 fault (squeezeObjects, sent with its own client), so the
// two squeeze the same way. No jest here: the soak imports this file.
import * as k8s from '@kubernetes/client-node';
import { waitFor } from './cluster.ts';

export const FLOWCONTROL_GROUP = 'flowcontrol.apiserver.k8s.io';
export const FLOWCONTROL_VERSION = 'v1';

export interface SqueezeSpec {
  /** The name of both objects. */
  name: string;
  /**
   * The priority level's seats' share: 0 leaves it no seat at all (every
   * request rejected; nothing to borrow), 1 a seat or so.
   */
  nominalConcurrencyShares: number;
  subjects: k8s.FlowcontrolV1Subject[];
  resourceRules: k8s.V1ResourcePolicyRule[];
}

/** The two objects of a squeeze, as the API server takes them. */
export function squeezeObjects(spec: SqueezeSpec): {
  priorityLevel: k8s.V1PriorityLevelConfiguration;
  flowSchema: k8s.V1FlowSchema;
} {
  const apiVersion = `${FLOWCONTROL_GROUP}/${FLOWCONTROL_VERSION}`;
  return {
    priorityLevel: {
      apiVersion,
      kind: 'PriorityLevelConfiguration',
      metadata: { name: spec.name },
      spec: {
        type: 'Limited',
        limited: {
          nominalConcurrencyShares: spec.nominalConcurrencyShares,
          lendablePercent: 0,
          borrowingLimitPercent: 0,
          limitResponse: { type: 'Reject' },
        },
      },
    },
    flowSchema: {
      apiVersion,
      kind: 'FlowSchema',
      metadata: { name: spec.name },
      spec: {
        priorityLevelConfiguration: { name: spec.name },
        // Before every default schema but `exempt` and `probes`.
        matchingPrecedence: 50,
        distinguisherMethod: { type: 'ByUser' },
        rules: [{ subjects: spec.subjects, resourceRules: spec.resourceRules }],
      },
    },
  };
}

/** Creates the squeeze (as an admin: system:masters is exempt from APF). */
export async function squeeze(kc: k8s.KubeConfig, spec: SqueezeSpec): Promise<void> {
  const admin = kc.makeApiClient(k8s.FlowcontrolApiserverV1Api);
  const { priorityLevel, flowSchema } = squeezeObjects(spec);
  await admin.createPriorityLevelConfiguration({ body: priorityLevel });
  await admin.createFlowSchema({ body: flowSchema });
}

/** Waits until the API server has taken the squeeze's FlowSchema up (it reports it not dangling). */
export async function squeezeInEffect(kc: k8s.KubeConfig, name: string): Promise<void> {
  const admin = kc.makeApiClient(k8s.FlowcontrolApiserverV1Api);
  await waitFor('the FlowSchema to take effect', async () => {
    const fs = await admin.readFlowSchema({ name });
    return fs.status?.conditions?.some((x) => x.type === 'Dangling' && x.status === 'False');
  });
}

/** Removes the squeeze; one already gone is fine. */
export async function liftSqueeze(kc: k8s.KubeConfig, name: string): Promise<void> {
  const admin = kc.makeApiClient(k8s.FlowcontrolApiserverV1Api);
  await admin.deleteFlowSchema({ name }).catch(() => undefined);
  await admin.deletePriorityLevelConfiguration({ name }).catch(() => undefined);
}
