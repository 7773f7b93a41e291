// Chart builders on plotly.js (served from the installed plotly package). Each takes plain data and
// draws with Plotly.react, so redrawing on every live update only touches what changed.

import { h, isRecord, STATUS_COLORS, trialDuration } from "./dom.js";

const FONT = { family: "Inter, system-ui, sans-serif", size: 12, color: "#334155" };
const CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
const GL_ABOVE = 3000; // points; beyond this scatter draws on WebGL to stay responsive

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

// plotly.js (4.8 MB) is loaded on first use, so pages without charts appear without waiting for it
let plotlyLoading = null;

function loadPlotly() {
  if (window.Plotly) return Promise.resolve(true);
  plotlyLoading ??= new Promise((resolve) => {
    const script = h("script", { src: "webui/vendor/plotly.min.js" });
    script.onload = () => resolve(true);
    script.onerror = () => resolve(false);
    document.head.append(script);
  });
  return plotlyLoading;
}

async function draw(el, traces, lay) {
  if (!(await loadPlotly())) {
    el.replaceChildren(h("div", { className: "empty error" },
      "plotly.js is not available: install the Python package with pip install 'plotly>=5'"));
    return;
  }
  el.querySelector(".empty")?.remove();
  window.Plotly.react(el, traces, lay, CONFIG);
}

function empty(el, message) {
  if (window.Plotly && el.data) window.Plotly.purge(el);
  el.replaceChildren(h("div", { className: "empty" }, message));
}

export function isBetter(a, b, mode) {
  return mode === "minimize" ? a < b : a > b;
}

// scatter of each trial's final metric, with the best-so-far curve over Trial No.
export function finalMetricPlot(el, trials, mode) {
  const done = trials.filter((t) => typeof t.final === "number");
  if (!done.length) return empty(el, "No final metric reported yet.");
  const best = [];
  let current = null;
  for (const t of done) {
    if (current === null || isBetter(t.final, current, mode)) current = t.final;
    best.push(current);
  }
  const type = done.length > GL_ABOVE ? "scattergl" : "scatter";
  const x = done.map((t) => t.seq);
  draw(el, [
    {
      type, mode: "markers", name: "final metric", x, y: done.map((t) => t.final),
      customdata: done.map((t) => t.id),
      marker: { color: done.map((t) => STATUS_COLORS[t.status]), size: 7, opacity: 0.85 },
      hovertemplate: "Trial %{x} (%{customdata})<br>%{y}<extra></extra>",
    },
    {
      type, mode: "lines", name: `best so far (${mode})`, x, y: best,
      line: { shape: "hv", color: "#f59e0b", width: 2 }, hoverinfo: "skip",
    },
  ], layout({ xaxis: { title: { text: "Trial No." } }, yaxis: { title: { text: "Default metric" } } }));
}

// one line per trial: intermediate results against their index
export function intermediatePlot(el, series, trialsById) {
  const ids = Object.keys(series).filter((id) => series[id].length);
  if (!ids.length) return empty(el, "No intermediate result matches.");
  const traces = ids.map((id) => {
    const trial = trialsById.get(id);
    const points = series[id];
    return {
      type: "scatter", mode: points.length > 1 ? "lines" : "markers",
      name: trial ? `#${trial.seq} ${id}` : id,
      x: points.map((p) => p[0]), y: points.map((p) => p[1]),
      line: { width: 1.5 },
      hovertemplate: `Trial ${trial ? trial.seq : ""} (${id})<br>step %{x}: %{y}<extra></extra>`,
    };
  });
  draw(el, traces, layout({
    showlegend: ids.length <= 12,
    xaxis: { title: { text: "Intermediate result index" } },
    yaxis: { title: { text: "Metric" } },
  }));
}

function dimension(label, values, spec) {
  const numeric = values.every((v) => typeof v === "number");
  if (numeric && /loguniform/.test(spec?._type || "") && values.every((v) => v > 0)) {
    const logs = values.map(Math.log10);
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

// parallel coordinates of the chosen parameters and the final metric, for the top N % of trials
export function parallelPlot(el, trials, { params, topPercent, mode, space = {} }) {
  let done = trials.filter((t) => typeof t.final === "number");
  if (!done.length || !params.length) return empty(el, "No succeeded trial with a final metric yet.");
  done = [...done].sort((a, b) => (isBetter(a.final, b.final, mode) ? -1 : 1));
  done = done.slice(0, Math.max(1, Math.ceil((done.length * topPercent) / 100)));
  const dims = params.map((p) => dimension(p, done.map((t) => (isRecord(t.params) && p in t.params ? t.params[p] : null)), space[p]));
  const finals = done.map((t) => t.final);
  dims.push({ label: "metric", values: finals });
  draw(el, [{
    type: "parcoords",
    line: { color: finals, colorscale: "Viridis", reversescale: mode === "minimize", showscale: true },
    dimensions: dims,
    labelangle: 0,
  }], layout({ margin: { l: 72, r: 72, t: 48, b: 24 } }));
}

// bar per trial: how long it ran, coloured by status
export function durationPlot(el, trials, now = Date.now()) {
  const ran = trials.filter((t) => t.start);
  if (!ran.length) return empty(el, "No trial has started yet.");
  draw(el, [{
    type: "bar", x: ran.map((t) => t.seq), y: ran.map((t) => trialDuration(t, now)),
    customdata: ran.map((t) => `${t.id} ${t.status}`),
    marker: { color: ran.map((t) => STATUS_COLORS[t.status]) },
    hovertemplate: "Trial %{x} (%{customdata})<br>%{y:.1f} s<extra></extra>",
  }], layout({ bargap: 0.15, xaxis: { title: { text: "Trial No." } }, yaxis: { title: { text: "Duration (s)" } } }));
}

// a single trial's intermediate curve (detail drawer, compare dialog)
export function trialCurvesPlot(el, curves) {
  const drawn = curves.filter((c) => c.points.length);
  if (!drawn.length) return empty(el, "No intermediate result reported yet.");
  draw(el, drawn.map((c) => ({
    type: "scatter", mode: c.points.length > 1 ? "lines+markers" : "markers", name: c.name,
    x: c.points.map((p) => p[0]), y: c.points.map((p) => p[1]), marker: { size: 5 },
  })), layout({ showlegend: drawn.length > 1, xaxis: { title: { text: "Intermediate result index" } }, yaxis: { title: { text: "Metric" } } }));
}
