// Chart builders. Most draw with plotly.js (its cartesian bundle, built from its npm package) through Plotly.react,
// so a redraw only touches what changed; the final-metric chart (metricchart.js, SVG) and the parallel
// coordinates (parcoords.js, a 2D canvas) are our own and never wait for plotly. Where 10,000 points cannot be
// read anyway the views are aggregated: a density of the final metrics, a histogram of durations, the top N
// trials on the parallel coordinates.

import { fmtParams, h, isRecord, STATUS_COLORS, trialDuration } from "./dom.js";
import { metricChart, releaseMetricChart } from "./metricchart.js";
import { parcoords, releaseParcoords } from "./parcoords.js";

const FONT = { family: "Inter, system-ui, sans-serif", size: 12, color: "#334155" };
const CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
export const POINTS_ABOVE_DENSITY = 1500; // final metrics drawn as points up to this many, as a density beyond
export const BARS_ABOVE_HISTOGRAM = 300; // one duration bar per trial up to this many, a histogram beyond

function layout(extra = {}) {
  return {
    font: FONT,
    margin: { l: 56, r: 16, t: 12, b: 44 },
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "#ffffff",
    hovermode: "closest",
    legend: { orientation: "h", y: -0.2 },
    xaxis: { gridcolor: "#eef1f5", zeroline: false, ...extra.xaxis },
    yaxis: { gridcolor: "#eef1f5", zeroline: false, ...extra.yaxis },
    ...Object.fromEntries(Object.entries(extra).filter(([k]) => k !== "xaxis" && k !== "yaxis")),
  };
}

// plotly.js (the cartesian bundle: 1.5 MB, 0.5 MB gzipped) is fetched from an immutable, versioned URL (the
// page's <meta name="plotly-src">) when a page with plotly charts is shown, after its cards and tables: a page
// without them (the Overview's only chart is metricchart.js's) never evaluates it (an evaluation blocks the
// page for 0.3-2 s), and its charts appear when it is ready
let plotlyLoading = null;

export function loadPlotly() {
  if (window.Plotly) return Promise.resolve(true);
  plotlyLoading ??= new Promise((resolve) => {
    const src = document.querySelector("meta[name=plotly-src]")?.content || "webui/vendor/plotly.min.js";
    const script = h("script", { src, async: true });
    // the first chart is drawn in a task of its own, not in the one that evaluated plotly: two blocks of the
    // main thread, each shorter than both
    script.onload = () => setTimeout(() => resolve(true), 0);
    script.onerror = () => resolve(false);
    document.head.append(script);
  });
  return plotlyLoading;
}

async function draw(el, traces, lay) {
  const waited = !window.Plotly;
  if (!(await loadPlotly())) {
    el.replaceChildren(h("div", { className: "empty error" },
      "plotly.js is not available: install the Python package with pip install 'plotly>=5'"));
    return;
  }
  // the charts that waited for plotly draw one per task, as the page's scheduler draws them (all in the task
  // that saw plotly ready held the Charts page for 200 ms under load)
  if (waited) await new Promise((resolve) => setTimeout(resolve, 0));
  if (!el.isConnected) return; // the page was left while plotly loaded
  el.querySelector(".empty")?.remove();
  measured(el, () => window.Plotly.react(el, traces, lay, CONFIG));
}

// each drawing is a user-timing measure named "draw <element id>", seen by a PerformanceObserver and the
// browser's performance panel; the timeline's own buffer is not left to grow with them
function measured(el, drawing) {
  const start = performance.now();
  try {
    return drawing();
  } finally {
    const name = `draw ${el.id || "plot"}`;
    performance.measure(name, { start });
    performance.clearMeasures(name);
  }
}

function empty(el, message) {
  release(el);
  el.replaceChildren(h("div", { className: "empty" }, message));
}

// free a plot's DOM and listeners (a page being left, a plot replaced by a message)
export function release(el) {
  if (releaseParcoords(el) || releaseMetricChart(el)) return;
  if (window.Plotly && el?.data) window.Plotly.purge(el); // its listeners too
}

export function isBetter(a, b, mode) {
  return mode === "minimize" ? a < b : a > b;
}

// the best-so-far curve as its steps only: a point where the best changes, and the last trial
function bestSoFar(done, mode) {
  const x = [];
  const y = [];
  let current = null;
  for (const t of done) {
    if (current === null || isBetter(t.final, current, mode)) {
      current = t.final;
      x.push(t.seq);
      y.push(current);
    }
  }
  if (done.length && x[x.length - 1] !== done[done.length - 1].seq) {
    x.push(done[done.length - 1].seq);
    y.push(current);
  }
  return { x, y };
}

// each trial's final metric over Trial No. (points, or their density beyond POINTS_ABOVE_DENSITY, with its
// colour scale), with the best-so-far curve, drawn by metricchart.js (no plotly.js): a point's tooltip shows
// the trial's parameters (once the page has them) and a click on it opens the trial
export function finalMetricPlot(el, trials, mode) {
  const done = trials.filter((t) => typeof t.final === "number");
  if (!done.length) return empty(el, "No final metric reported yet.");
  const x = done.map((t) => t.seq);
  const y = done.map((t) => t.final);
  const best = bestSoFar(done, mode);
  const metric = done.length > POINTS_ABOVE_DENSITY
    ? {
      type: "histogram2d", name: "final metric (density)", x, y, nbinsx: 60, nbinsy: 40,
      colorscale: [[0, "rgba(37,99,235,0)"], [0.001, "rgba(37,99,235,0.12)"], [1, "rgba(30,58,138,1)"]],
      showscale: true, colorbar: { title: { text: "trials" } },
    }
    : {
      type: "scatter", mode: "markers", name: "final metric", x, y,
      customdata: done.map((t) => [t.id, t.params === undefined ? "" : fmtParams(t.params)]),
      marker: { color: done.map((t) => STATUS_COLORS[t.status]) },
    };
  measured(el, () => metricChart(el, [metric, {
    type: "scatter", mode: "lines", name: `best so far (${mode})`, x: best.x, y: best.y,
    line: { shape: "hv", color: "#f59e0b", width: 2 },
  }], {
    xTitle: "Trial No.", yTitle: "Default metric",
    onPick: (id) => { location.hash = `#/trials/${encodeURIComponent(id)}`; },
  }));
}

// whole-number ticks on an axis of indices (never 0.5)
function indexAxis(maxIndex) {
  return { title: { text: "Intermediate result index" }, tickformat: "d", ...(maxIndex <= 10 ? { dtick: 1 } : {}) };
}

// one line per trial: intermediate results against their index
export function intermediatePlot(el, series, trialsById) {
  const ids = Object.keys(series).filter((id) => series[id].length);
  if (!ids.length) return empty(el, "No intermediate result matches.");
  let maxIndex = 0;
  const traces = ids.map((id) => {
    const trial = trialsById.get(id);
    const points = series[id];
    maxIndex = Math.max(maxIndex, points[points.length - 1][0]);
    return {
      type: "scatter", mode: points.length > 1 ? "lines" : "markers",
      name: trial ? `#${trial.seq} ${id}` : id,
      x: points.map((p) => p[0]), y: points.map((p) => p[1]),
      line: { width: 1.5 },
      hovertemplate: `Trial ${trial ? trial.seq : ""} (${id})<br>step %{x}: %{y}<extra></extra>`,
    };
  });
  draw(el, traces, layout({ showlegend: ids.length <= 12, xaxis: indexAxis(maxIndex), yaxis: { title: { text: "Metric" } } }));
}

// log-spaced: a loguniform/qloguniform parameter, or numeric choices whose values grow by a factor
function logSpaced(spec, values) {
  if (!values.every((v) => typeof v === "number" && v > 0)) return false;
  if (/loguniform/.test(spec?._type || "")) return true;
  if (spec?._type !== "choice") return false;
  const options = [...new Set(spec._value)].filter((v) => typeof v === "number" && v > 0).sort((a, b) => a - b);
  if (options.length < 3 || options.length !== spec._value.length) return false;
  const ratios = options.slice(1).map((v, i) => v / options[i]);
  return Math.max(...ratios) / Math.min(...ratios) < 1.5 && ratios[0] >= 1.9;
}

function dimension(label, values, spec) {
  const numeric = values.every((v) => typeof v === "number");
  if (numeric && logSpaced(spec, values)) {
    const logs = values.map(Math.log10);
    if (spec?._type === "choice") { // ticks at the choices themselves
      const options = [...spec._value].sort((a, b) => a - b);
      return { label: `${label} (log)`, values: logs, tickvals: options.map(Math.log10), ticktext: options.map(String) };
    }
    const powers = [];
    for (let p = Math.floor(Math.min(...logs)); p <= Math.ceil(Math.max(...logs)); p++) powers.push(p);
    return { label: `${label} (log)`, values: logs, tickvals: powers, ticktext: powers.map((p) => `1e${p}`) };
  }
  if (numeric) return { label, values };
  const categories = [...new Set(values.map((v) => JSON.stringify(v)))].sort();
  const index = new Map(categories.map((c, i) => [c, i]));
  return {
    label, values: values.map((v) => index.get(JSON.stringify(v))),
    tickvals: categories.map((_, i) => i), ticktext: categories.map((c) => c.replace(/^"|"$/g, "")),
  };
}

// the best `top` trials by final metric (all when top is 0), best first
export function topTrials(trials, top, mode) {
  const done = trials.filter((t) => typeof t.final === "number");
  done.sort((a, b) => (a.final === b.final ? a.seq - b.seq : isBetter(a.final, b.final, mode) ? -1 : 1));
  return top ? done.slice(0, top) : done;
}

// parallel coordinates of the chosen parameters and the final metric, for the best `top` trials
export function parallelPlot(el, trials, { params, top, mode, space = {} }) {
  const shown = topTrials(trials, top, mode);
  if (!shown.length || !params.length) return empty(el, "No succeeded trial with a final metric yet.");
  const dims = params.map((p) => dimension(p, shown.map((t) => (isRecord(t.params) && p in t.params ? t.params[p] : null)), space[p]));
  const finals = shown.map((t) => t.final);
  // the metric's axis stays where it was dragged to (last at first)
  const before = el.data?.[0]?.dimensions?.map((d) => d.label) || [];
  const at = before.indexOf("metric");
  const index = at < 0 ? dims.length : before.slice(0, at).filter((label) => dims.some((d) => d.label === label)).length;
  dims.splice(index, 0, { label: "metric", values: finals });
  measured(el, () => parcoords(el, {
    type: "parcoords",
    customdata: shown.map((t) => t.id),
    line: { color: finals, reversescale: mode === "minimize" },
    dimensions: dims,
  }));
}

// how long each trial ran, from its own start and end (running ones: until now): one bar per trial, or a
// histogram of finished and running trials' durations beyond BARS_ABOVE_HISTOGRAM trials
export function durationPlot(el, trials, now = Date.now()) {
  const ran = trials.filter((t) => t.start);
  if (!ran.length) return empty(el, "No trial has started yet.");
  if (ran.length <= BARS_ABOVE_HISTOGRAM) {
    return draw(el, [{
      type: "bar", x: ran.map((t) => t.seq), y: ran.map((t) => trialDuration(t, now)),
      customdata: ran.map((t) => `${t.id} ${t.status}`),
      marker: { color: ran.map((t) => STATUS_COLORS[t.status]) },
      hovertemplate: "Trial %{x} (%{customdata})<br>%{y:.1f} s<extra></extra>",
    }], layout({ bargap: 0.15, xaxis: { title: { text: "Trial No." } }, yaxis: { title: { text: "Duration (s)" } } }));
  }
  const ended = ran.filter((t) => t.end);
  const running = ran.filter((t) => !t.end);
  const trace = (name, list, color) => ({
    type: "histogram", name: `${name} (${list.length})`, x: list.map((t) => trialDuration(t, now)),
    marker: { color }, opacity: 0.85, nbinsx: 50,
    hovertemplate: "%{x} s<br>%{y} trials<extra></extra>",
  });
  draw(el, [trace("finished", ended, STATUS_COLORS.SUCCEEDED), trace("running", running, STATUS_COLORS.RUNNING)],
    layout({ barmode: "stack", bargap: 0.05, xaxis: { title: { text: "Duration (s)" } }, yaxis: { title: { text: "Trials" } } }));
}

// a single trial's intermediate curve (detail drawer, compare dialog)
export function trialCurvesPlot(el, curves) {
  const drawn = curves.filter((c) => c.points.length);
  if (!drawn.length) return empty(el, "No intermediate result reported yet.");
  const maxIndex = Math.max(...drawn.map((c) => c.points[c.points.length - 1][0]));
  draw(el, drawn.map((c) => ({
    type: "scatter", mode: c.points.length > 1 ? "lines+markers" : "markers", name: c.name,
    x: c.points.map((p) => p[0]), y: c.points.map((p) => p[1]), marker: { size: 5 },
  })), layout({ showlegend: drawn.length > 1, xaxis: indexAxis(maxIndex), yaxis: { title: { text: "Metric" } } }));
}
