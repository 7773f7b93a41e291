// Compact records of every trial, loaded once on first use and then kept current from the poll's
// deltas (only changed trials travel). Used by the charts and the overview's metric chart.

import { api } from "./api.js";

let trials = null; // Map id → summary, sorted by sequence id when read
let loading = null;
const pending = []; // deltas that arrived while loading: re-applied after, as the load may predate them

export async function all() {
  while (!trials) {
    loading ??= api.allTrials().then((answer) => {
      trials = new Map(answer.trials.map((t) => [t.id, t]));
      loading = null;
      for (const delta of pending.splice(0)) apply(delta);
    });
    await loading;
  }
  return [...trials.values()].sort((a, b) => a.seq - b.seq);
}

export function apply(delta) {
  if (loading) {
    pending.push(delta);
    return;
  }
  if (delta.reset) {
    trials = null; // too much changed at once: reload on next use
    return;
  }
  if (!trials) return;
  for (const trial of delta.trials) trials.set(trial.id, trial);
}
