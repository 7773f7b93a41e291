// Compact records of every trial, loaded once on first use and then kept current from the poll's deltas
// (only changed trials travel). Used by the charts and the overview's metric chart.
//
// A delta too big for the change feed ("reset") reloads the records in the background while the old
// ones stay shown; deltas arriving meanwhile are applied after the load, which may predate them.

import { api } from "./api.js";

let trials = null; // Map id → summary
let sorted = null; // the same records by sequence id, rebuilt on read after a change
let loading = null;
let stale = false;
const pending = [];
const listeners = new Set();
export let version = 0; // bumped on every change: a chart redraws only when it moved

function load() {
  loading ??= api.allTrials().then((answer) => {
    const fresh = new Map(answer.trials.map((t) => [t.id, t]));
    loading = null;
    stale = false;
    trials = fresh;
    changed();
    for (const delta of pending.splice(0)) apply(delta);
  }, (error) => {
    loading = null;
    throw error;
  });
  return loading;
}

function changed() {
  sorted = null;
  version++;
  for (const listener of listeners) listener();
}

// every trial by sequence id (loads them on first use)
export async function all() {
  while (!trials) await load();
  return list();
}

// what is held now, by sequence id, without waiting (empty before the first load)
export function list() {
  if (!trials) return [];
  sorted ??= [...trials.values()].sort((a, b) => a.seq - b.seq);
  return sorted;
}

// The final results alone (id, sequence id, status, final metric of every trial), a fraction of the summaries'
// size: what a final-metric chart is first drawn from while they load. Null once the summaries are held.
export async function finals() {
  if (trials) return null;
  const columns = await api.finals().catch((error) => console.warn("final results", error));
  if (!columns || trials) return null;
  return columns.seq.map((seq, i) => ({ id: columns.id[i], seq, status: columns.status[i], final: columns.final[i] }));
}

export function loaded() {
  return trials !== null;
}

// call `listener` after every change; returns the function that stops it
export function subscribe(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function apply(delta) {
  if (loading) {
    pending.push(delta);
    return;
  }
  if (!trials) return; // nobody asked yet: nothing to keep current
  if (delta.reset) {
    stale = true;
    load().catch((error) => console.warn("reloading trials failed", error));
    return;
  }
  if (!delta.trials.length) return;
  for (const trial of delta.trials) trials.set(trial.id, trial);
  changed();
}

export function isStale() {
  return stale;
}
