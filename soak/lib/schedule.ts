// The soak's timeline, computed before it starts from the duration, the seed
// and the contender: alternating work and quiet phases (RSS is read at the end
// of each quiet period), and the faults placed inside the work phases, one at
// a time. Pure, so the same seed always gives the same plan.
import { Prng } from './prng.ts';

export const FAULT_KINDS = [
  'apiserver-restart',
  'etcd-compaction',
  'gc-kill',
  'leader-stop',
  'squeeze-429',
  'crd-version-flip',
  'conversion-webhook',
  'net-cut-list',
  'net-cut-watch',
  'net-reset',
  'net-delay',
  'net-blackhole',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export type ContenderName = 'kubegc' | 'kcm';

/** Fault kinds that make sense for a contender (kcm runs one GC process without leader election). */
export function faultKindsFor(contender: ContenderName): FaultKind[] {
  return FAULT_KINDS.filter((k) => contender === 'kubegc' || k !== 'leader-stop');
}

export interface Phase {
  kind: 'work' | 'quiet';
  index: number;
  durationMs: number;
}

export interface PlannedFault {
  kind: FaultKind;
  /** Index of the work phase it belongs to. */
  phase: number;
  /** Offset from the start of that work phase. */
  offsetMs: number;
  /** How long the fault is held before it is undone (0 for instant faults). */
  holdMs: number;
}

export interface Schedule {
  seed: number;
  phases: Phase[];
  faults: PlannedFault[];
}

export interface ScheduleOptions {
  durationMs: number;
  seed: number;
  contender: ContenderName;
  /** Exactly these faults, in this order (default: every kind for the contender, cycled). */
  faults?: FaultKind[];
  quietMs?: number;
  /** One fault per slot of this length inside a work phase. */
  faultSlotMs?: number;
  /** The kubegc lease duration: a stopped leader stays stopped longer than this. */
  leaseDurationMs?: number;
}

const HOLD_MS: Record<FaultKind, (p: Prng, lease: number) => number> = {
  'apiserver-restart': () => 0,
  'etcd-compaction': () => 0,
  'gc-kill': (p) => p.int(1_000, 4_000),
  'leader-stop': (p, lease) => lease + p.int(2_000, 5_000),
  'squeeze-429': (p) => p.int(12_000, 18_000),
  'crd-version-flip': (p) => p.int(10_000, 20_000),
  'conversion-webhook': (p) => p.int(10_000, 20_000),
  // The window in which connections are cut after N server bytes (below kubegc's 30 s
  // initial-sync timeout: the restarted processes do sync once it closes).
  'net-cut-list': (p) => p.int(8_000, 15_000),
  'net-cut-watch': () => 0,
  'net-reset': () => 0,
  'net-delay': (p) => p.int(10_000, 20_000),
  // Longer than kubegc's HTTP/2 ping timeout (15 s) and the lease (8 s).
  'net-blackhole': (p) => p.int(20_000, 30_000),
};

export function planSchedule(o: ScheduleOptions): Schedule {
  const quietMs = o.quietMs ?? 30_000;
  const slotMs = o.faultSlotMs ?? 30_000;
  const lease = o.leaseDurationMs ?? 8_000;
  if (!(o.durationMs >= 60_000)) throw new Error('the soak needs a duration of at least 1m');
  // Work phases of about 2 minutes on long runs, 1 minute on short ones; each followed by quiet.
  const targetWork = o.durationMs >= 10 * 60_000 ? 120_000 : 60_000;
  const cycles = Math.max(1, Math.round(o.durationMs / (targetWork + quietMs)));
  const workMs = Math.max(30_000, Math.floor(o.durationMs / cycles) - quietMs);
  const phases: Phase[] = [];
  for (let i = 0; i < cycles; i++) {
    phases.push({ kind: 'work', index: i, durationMs: workMs });
    phases.push({ kind: 'quiet', index: i, durationMs: quietMs });
  }
  const prng = new Prng(o.seed, `schedule/${o.contender}`);
  const slotsPerPhase = Math.max(1, Math.floor(workMs / slotMs));
  const slots: { phase: number; slot: number }[] = [];
  for (let p = 0; p < cycles; p++)
    for (let s = 0; s < slotsPerPhase; s++) slots.push({ phase: p, slot: s });
  const allowed = faultKindsFor(o.contender);
  let kinds: FaultKind[];
  if (o.faults) {
    const bad = o.faults.filter((k) => !allowed.includes(k));
    if (bad.length) throw new Error(`faults not available for ${o.contender}: ${bad.join(', ')}`);
    kinds = o.faults;
  } else {
    kinds = [];
    while (kinds.length < slots.length) kinds.push(...prng.shuffle(allowed));
    kinds = kinds.slice(0, slots.length);
  }
  if (kinds.length > slots.length)
    throw new Error(
      `${kinds.length} faults do not fit in ${slots.length} fault slots of ${slotMs / 1000}s; use a longer --duration`,
    );
  // Spread the faults evenly over the slots, one per slot.
  const faults: PlannedFault[] = [];
  kinds.forEach((kind, i) => {
    const at = slots[Math.floor((i * slots.length) / kinds.length)];
    if (!at) return;
    faults.push({
      kind,
      phase: at.phase,
      // Some jitter inside the slot, leaving room for the workload to build first.
      offsetMs: at.slot * slotMs + prng.int(3_000, Math.min(8_000, Math.floor(slotMs / 3))),
      holdMs: HOLD_MS[kind](prng, lease),
    });
  });
  return { seed: o.seed, phases, faults };
}

/** "30m", "90s", "1h", "1m30s", or plain milliseconds. */
export function parseDuration(text: string): number {
  if (/^\d+$/.test(text)) return Number(text);
  const re = /(\d+(?:\.\d+)?)(ms|h|m|s)/gy;
  let total = 0;
  let matched = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    const n = Number(m[1]);
    const unit = m[2];
    total += n * (unit === 'h' ? 3_600_000 : unit === 'm' ? 60_000 : unit === 's' ? 1000 : 1);
    matched += m[0].length;
  }
  if (matched !== text.length || text.length === 0)
    throw new Error(`not a duration: "${text}" (use e.g. 30m, 90s, 1h, 2m30s)`);
  return total;
}
