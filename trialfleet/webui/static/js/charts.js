// Charts: final metric with the best-so-far curve, hyper-parameter parallel coordinates, intermediate
// results (downsampled on the server, filtered by step and value range) and trial durations.
//
// The trials come from the trial cache, which the change feed keeps current: nothing is re-fetched to
// redraw. Each chart redraws through the page's scheduler, one chart per task and each at most once a
// second, and only when its data or options moved; leaving the page frees every plot.

import { api } from "./api.js";
import { card, debounce, h, isRecord, redrawScheduler } from "./dom.js";
import { durationPlot, finalMetricPlot, intermediatePlot, parallelPlot, release } from "./plots.js";
import * as trialCache from "./trialcache.js";

const TOP_TRIALS = [20, 50, 100, 200, 500, 1000, 0]; // 0: all
const DEFAULT_TOP = 100;
const TRIAL_LIMITS = [20, 50, 100, 500];
const REDRAW_MS = 1000;
const INTERMEDIATE_MS = 2000; // a server query: at most every other second while trials report

let root = null;
let state = null;
let els = {};
let scheduler = null;
let unsubscribe = null;
const opts = { mode: null, top: DEFAULT_TOP, hiddenParams: new Set(), key: "default", step: "", min: "", max: "", trials: 50 };
const drawn = {}; // chart → the data version and options it shows
let intermediateAgain = false; // asked again while a query runs: the newest filters must win
let intermediateBusy = false;

function select(id, values, current, label, onChange, text = String) {
  return h("label", { className: "muted control" }, label, " ", h("select", { className: "select", id, onchange: (e) => onChange(e.target.value) },
    values.map((v) => h("option", { value: String(v), selected: String(v) === String(current) }, text(v)))));
}

function paramNames(trials) {
  const names = new Set(Object.keys(state.exp.searchSpace || {}));
  for (const t of trials) if (isRecord(t.params)) for (const k of Object.keys(t.params)) names.add(k);
  return [...names];
}

// keep the axis order the user dragged to when redrawing
function orderedParams(el, trials) {
  const chosen = paramNames(trials).filter((p) => !opts.hiddenParams.has(p));
  const shown = el.data?.[0]?.dimensions?.map((d) => d.label.replace(/ \(log\)$/, "")) || [];
  const rank = (p) => (shown.includes(p) ? shown.indexOf(p) : shown.length + chosen.indexOf(p));
  return chosen.sort((a, b) => rank(a) - rank(b));
}

function renderAxes(trials) {
  const names = paramNames(trials);
  if (els.axes.childElementCount === names.length) return;
  els.axes.replaceChildren(...names.map((p) => h("label", { className: "check" },
    h("input", { type: "checkbox", checked: !opts.hiddenParams.has(p), dataset: { axis: p },
      onchange: (e) => { if (e.target.checked) opts.hiddenParams.delete(p); else opts.hiddenParams.add(p); redraw("parallel"); } }), p)));
}

// a chart is drawn again only when the trials or its options moved since it was last drawn
function moved(chart, key) {
  if (drawn[chart] === key) return false;
  drawn[chart] = key;
  return true;
}

const CHARTS = {
  metric: () => {
    if (!moved("metric", `${trialCache.version}|${opts.mode}`)) return;
    finalMetricPlot(els.metric, trialCache.list(), opts.mode);
  },
  parallel: () => {
    const trials = trialCache.list();
    renderAxes(trials);
    const params = orderedParams(els.parallel, trials);
    if (!moved("parallel", `${trialCache.version}|${opts.mode}|${opts.top}|${params}`)) return;
    parallelPlot(els.parallel, trials, { params, top: opts.top, mode: opts.mode, space: state.exp.searchSpace || {} });
  },
  duration: () => {
    const running = state.exp.counts.RUNNING || 0; // running trials' durations grow: redraw each second
    if (!moved("duration", `${trialCache.version}|${running ? Math.floor(Date.now() / 1000) : ""}`)) return;
    durationPlot(els.duration, trialCache.list());
  },
  intermediate: () => refreshIntermediate(),
};

function redraw(...charts) {
  if (!trialCache.loaded() && charts.some((c) => c !== "intermediate")) return;
  for (const chart of charts) scheduler.mark(chart);
}

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
    intermediatePlot(els.intermediate, answer.series, new Map(trialCache.list().map((t) => [t.id, t])));
  } catch (error) {
    els.intermediateNote.textContent = String(error.message || error);
  } finally {
    intermediateBusy = false;
    if (intermediateAgain && root) {
      intermediateAgain = false;
      redraw("intermediate");
    }
  }
}

function metricKeyOptions() {
  const keys = new Set(["default"]);
  for (const t of trialCache.list()) if (isRecord(t.finalData)) for (const k of Object.keys(t.finalData)) keys.add(k);
  return [...keys];
}

function renderKeyOptions() {
  const keys = metricKeyOptions();
  if (keys.length === els.key.options.length) return;
  els.key.replaceChildren(...keys.map((k) => h("option", { value: k, selected: k === opts.key }, k)));
}

function intermediateControls() {
  // applied as typed (after a pause), not only on Enter
  const apply = debounce(() => redraw("intermediate"), 300);
  const input = (id, key, placeholder) => h("input", { className: "input narrow", id, placeholder, value: opts[key], oninput: (e) => { opts[key] = e.target.value.trim(); apply(); } });
  return h("div", { className: "controls" },
    h("label", { className: "muted control" }, "Metric ", els.key),
    h("label", { className: "muted control" }, "At index ", input("intermediate-step", "step", "any")),
    h("label", { className: "muted control" }, "value from ", input("intermediate-min", "min", "min"), " to ", input("intermediate-max", "max", "max")),
    select("intermediate-trials", TRIAL_LIMITS, opts.trials, "Trials", (v) => { opts.trials = +v; redraw("intermediate"); }),
    els.intermediateNote);
}

function mount(container, appState) {
  root = container;
  state = appState;
  opts.mode ??= state.exp.optimizeMode;
  for (const chart of Object.keys(drawn)) delete drawn[chart];
  scheduler = redrawScheduler(CHARTS, { minInterval: REDRAW_MS, intervals: { intermediate: INTERMEDIATE_MS } });
  els = {
    metric: h("div", { className: "plot", id: "chart-metric" }),
    parallel: h("div", { className: "plot tall", id: "chart-parallel" }),
    intermediate: h("div", { className: "plot", id: "chart-intermediate" }),
    duration: h("div", { className: "plot", id: "chart-duration" }),
    axes: h("div", { className: "chips axes" }),
    intermediateNote: h("span", { className: "muted small", id: "intermediate-note" }),
    key: h("select", { className: "select", id: "intermediate-key", onchange: (e) => { opts.key = e.target.value; redraw("intermediate"); } }),
  };
  for (const el of [els.metric, els.parallel, els.intermediate, els.duration]) el.append(h("div", { className: "empty" }, "Loading…"));
  const modeSelect = select("metric-mode", ["maximize", "minimize"], opts.mode, "Optimize", (v) => { opts.mode = v; redraw("metric", "parallel"); });
  const topSelect = select("parallel-top", TOP_TRIALS, opts.top, "Show", (v) => { opts.top = +v; redraw("parallel"); },
    (v) => (v ? `top ${v} trials` : "all trials"));
  root.append(
    h("h1", { className: "page-title" }, "Charts"),
    card("Default metric", els.metric, modeSelect),
    card("Hyper-parameters", h("div", {},
      h("div", { className: "controls" }, els.axes, h("span", { className: "muted small" }, "Drag an axis title to reorder; drag along an axis to filter.")),
      els.parallel), topSelect),
    h("div", { className: "grid grid-2" },
      card("Intermediate results", h("div", {}, intermediateControls(), els.intermediate)),
      card("Duration", els.duration)));
  unsubscribe = trialCache.subscribe(() => { renderKeyOptions(); redraw("metric", "parallel", "duration"); });
  redraw("intermediate");
  // the metric chart from the final results alone, while every trial's summary loads
  trialCache.finals().then((trials) => {
    if (root && trials && !trialCache.loaded()) finalMetricPlot(els.metric, trials, opts.mode);
  });
  trialCache.all().then(() => {
    if (!root) return;
    renderKeyOptions();
    redraw("metric", "parallel", "duration");
  });
}

function update(delta, appState) {
  state = appState;
  if (!root) return;
  if (delta.changed || delta.metrics) redraw("intermediate");
  if (state.exp.counts.RUNNING) redraw("duration");
}

function unmount() {
  unsubscribe?.();
  scheduler?.cancel();
  for (const el of [els.metric, els.parallel, els.intermediate, els.duration]) release(el);
  root = null;
  els = {};
}

export default { mount, update, unmount };
