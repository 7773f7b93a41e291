// Charts: final metric with the best-so-far curve, hyper-parameter parallel coordinates, intermediate
// results (downsampled on the server, filtered by step and value range) and trial durations.

import { api } from "./api.js";
import { adaptiveThrottle, card, h, isRecord } from "./dom.js";
import { durationPlot, finalMetricPlot, intermediatePlot, parallelPlot } from "./plots.js";
import * as trialCache from "./trialcache.js";

const TOP_PERCENTS = [100, 80, 50, 20, 5, 1];
const MAX_LINES = 2000; // parallel-coordinate lines drawn by default; more make the page sluggish
const TRIAL_LIMITS = [20, 50, 100, 500];

let root = null;
let state = null;
let els = {};
const opts = { mode: null, topPercent: null, hiddenParams: new Set(), key: "default", step: "", min: "", max: "", trials: 50 };
let trials = [];
let intermediateBusy = false;
let intermediateAgain = false; // asked again while busy: the newest filters must win

function select(id, values, current, label, onChange) {
  return h("label", { className: "muted control" }, label, " ", h("select", { className: "select", id, onchange: (e) => onChange(e.target.value) },
    values.map((v) => h("option", { value: String(v), selected: String(v) === String(current) }, typeof v === "number" && id === "top-percent" ? `top ${v}%` : String(v)))));
}

function paramNames() {
  const names = new Set(Object.keys(state.exp.searchSpace || {}));
  for (const t of trials) if (isRecord(t.params)) for (const k of Object.keys(t.params)) names.add(k);
  return [...names];
}

// keep the axis order the user dragged to when redrawing
function orderedParams(el) {
  const chosen = paramNames().filter((p) => !opts.hiddenParams.has(p));
  const shown = el.data?.[0]?.dimensions?.map((d) => d.label.replace(/ \(log\)$/, "")) || [];
  const rank = (p) => (shown.includes(p) ? shown.indexOf(p) : shown.length + chosen.indexOf(p));
  return chosen.sort((a, b) => rank(a) - rank(b));
}

function renderAxes() {
  els.axes.replaceChildren(...paramNames().map((p) => h("label", { className: "check" },
    h("input", { type: "checkbox", checked: !opts.hiddenParams.has(p), dataset: { axis: p },
      onchange: (e) => { if (e.target.checked) opts.hiddenParams.delete(p); else opts.hiddenParams.add(p); drawParallel(); } }), p)));
}

function drawParallel() {
  parallelPlot(els.parallel, trials, {
    params: orderedParams(els.parallel), topPercent: opts.topPercent, mode: opts.mode, space: state.exp.searchSpace || {},
  });
}

function drawFromCache() {
  finalMetricPlot(els.metric, trials, opts.mode);
  drawParallel();
  durationPlot(els.duration, trials);
}

// the largest top-N % that keeps the parallel coordinates under MAX_LINES lines
function defaultTopPercent(count) {
  return TOP_PERCENTS.find((p) => (count * p) / 100 <= MAX_LINES) || TOP_PERCENTS[TOP_PERCENTS.length - 1];
}

const refreshTrials = adaptiveThrottle(async () => {
  trials = await trialCache.all();
  if (!root) return;
  if (opts.topPercent === null) {
    opts.topPercent = defaultTopPercent(trials.filter((t) => typeof t.final === "number").length);
    document.getElementById("top-percent").value = String(opts.topPercent);
  }
  if (els.axes.childElementCount !== paramNames().length) renderAxes();
  renderKeyOptions();
  drawFromCache();
});

async function refreshIntermediate() {
  if (intermediateBusy) {
    intermediateAgain = true;
    return;
  }
  intermediateBusy = true;
  try {
    const answer = await api.intermediate({ key: opts.key, step: opts.step, min: opts.min, max: opts.max, trials: opts.trials, points: 200 });
    if (!root) return;
    const shown = Object.keys(answer.series).length;
    els.intermediateNote.textContent = answer.total > shown ? `showing the newest ${shown} of ${answer.total} trials` : `${answer.total} trials`;
    intermediatePlot(els.intermediate, answer.series, new Map(trials.map((t) => [t.id, t])));
  } catch (error) {
    els.intermediateNote.textContent = String(error.message || error);
  } finally {
    intermediateBusy = false;
    if (intermediateAgain && root) {
      intermediateAgain = false;
      refreshIntermediate();
    }
  }
}

function metricKeyOptions() {
  const keys = new Set(["default"]);
  for (const t of trials) if (t.finalData && typeof t.finalData === "object") for (const k of Object.keys(t.finalData)) keys.add(k);
  return [...keys];
}

function renderKeyOptions() {
  const keys = metricKeyOptions();
  if (keys.length === els.key.options.length) return;
  els.key.replaceChildren(...keys.map((k) => h("option", { value: k, selected: k === opts.key }, k)));
}

function intermediateControls() {
  const input = (id, key, placeholder) => h("input", { className: "input narrow", id, placeholder, value: opts[key], onchange: (e) => { opts[key] = e.target.value.trim(); refreshIntermediate(); } });
  return h("div", { className: "controls" },
    h("label", { className: "muted control" }, "Metric ", els.key),
    h("label", { className: "muted control" }, "At index ", input("intermediate-step", "step", "any")),
    h("label", { className: "muted control" }, "value from ", input("intermediate-min", "min", "min"), " to ", input("intermediate-max", "max", "max")),
    select("intermediate-trials", TRIAL_LIMITS, opts.trials, "Trials", (v) => { opts.trials = +v; refreshIntermediate(); }),
    els.intermediateNote);
}

function mount(container, appState) {
  root = container;
  state = appState;
  opts.mode ??= state.exp.optimizeMode;
  els = {
    metric: h("div", { className: "plot", id: "chart-metric" }),
    parallel: h("div", { className: "plot tall", id: "chart-parallel" }),
    intermediate: h("div", { className: "plot", id: "chart-intermediate" }),
    duration: h("div", { className: "plot", id: "chart-duration" }),
    axes: h("div", { className: "chips axes" }),
    intermediateNote: h("span", { className: "muted small", id: "intermediate-note" }),
    key: h("select", { className: "select", id: "intermediate-key", onchange: (e) => { opts.key = e.target.value; refreshIntermediate(); } }),
  };
  const modeSelect = select("metric-mode", ["maximize", "minimize"], opts.mode, "Optimize", (v) => { opts.mode = v; drawFromCache(); });
  root.append(
    h("h1", { className: "page-title" }, "Charts"),
    card("Default metric", els.metric, modeSelect),
    card("Hyper-parameters", h("div", {},
      h("div", { className: "controls" }, els.axes, h("span", { className: "muted small" }, "Drag an axis title to reorder; drag along an axis to filter.")),
      els.parallel),
    select("top-percent", TOP_PERCENTS, opts.topPercent ?? 100, "Show", (v) => { opts.topPercent = +v; drawParallel(); })),
    h("div", { className: "grid grid-2" },
      card("Intermediate results", h("div", {}, intermediateControls(), els.intermediate)),
      card("Duration", els.duration)));
  refreshTrials();
  refreshIntermediate();
}

function update(delta, appState) {
  state = appState;
  if (!root) return;
  if (delta.changed) {
    refreshTrials();
    refreshIntermediate();
  } else if (state.exp.counts.RUNNING) {
    refreshTrials(); // running trials' duration bars grow every second
  }
}

function unmount() {
  root = null;
}

export default { mount, update, unmount };
