// Chart builders. The Overview's and the Charts page's charts are our own, drawn without plotly.js: SVG
// (svgchart.js) for the final metric, the intermediate results and the durations, a 2D canvas (parcoords.js)
// for the parallel coordinates. A trial's curves (its drawer, the comparison) draw with plotly.js (its
// cartesian bundle, built from its npm package) through Plotly.react. Where 10,000 points cannot be read anyway
// the views are aggregated: a density of the final metrics, a histogram of durations, the top N trials on the
// parallel coordinates.

import { fmtNumber, fmtParams, h, isRecord, STATUS_COLORS, trialDuration } from "./dom.js";
import { niceTicks, parcoords, releaseParcoords } from "./parcoords.js";
import { COLORWAY, domain, releaseSvgChart, scaleColor, svg, svgChart } from "./svgchart.js";

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
// page's <meta name="plotly-src">) when a trial's curves are first drawn: no page evaluates it before (an
// evaluation blocks the page for 0.3-2 s), and the curves appear when it is ready
let plotlyLoading = null;

function loadPlotly() {
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
  if (!(await loadPlotly())) {
    el.replaceChildren(h("div", { className: "empty error" },
      "plotly.js is not available: install the Python package with pip install 'plotly>=5'"));
    return;
  }
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
  if (releaseParcoords(el) || releaseSvgChart(el)) return;
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

const DENSITY = [[0, "rgba(37,99,235,0)"], [0.001, "rgba(37,99,235,0.12)"], [1, "rgba(30,58,138,1)"]];

// the density's cells: how many trials fall in each (Trial No., metric) cell, nbinsx by nbinsy over their range
function cells(trace) {
  const [x0, x1] = domain(trace.x);
  const [y0, y1] = domain(trace.y);
  const nx = trace.nbinsx;
  const ny = trace.nbinsy;
  const counts = new Uint32Array(nx * ny);
  for (let i = 0; i < trace.x.length; i++) {
    const cx = Math.min(nx - 1, Math.floor(((trace.x[i] - x0) / (x1 - x0)) * nx));
    const cy = Math.min(ny - 1, Math.floor(((trace.y[i] - y0) / (y1 - y0)) * ny));
    counts[cy * nx + cx] += 1;
  }
  let max = 1;
  for (const n of counts) if (n > max) max = n;
  return { x0, x1, y0, y1, nx, ny, counts, max };
}

function cellMarks(grid, { x, y }) {
  const marks = [];
  const w = x(grid.x0 + (grid.x1 - grid.x0) / grid.nx) - x(grid.x0);
  const h = y(grid.y0) - y(grid.y0 + (grid.y1 - grid.y0) / grid.ny);
  for (let k = 0; k < grid.counts.length; k++) {
    const n = grid.counts[k];
    if (!n) continue;
    const [cx, cy] = [k % grid.nx, Math.floor(k / grid.nx)];
    marks.push(svg("rect", { class: "cell", x: x(grid.x0) + cx * w, y: y(grid.y0) - (cy + 1) * h, width: w + 0.5, height: h + 0.5,
      fill: scaleColor(DENSITY, n / grid.max), "data-tip": k, "data-count": n }));
  }
  return marks;
}

function cellTip(grid, k) {
  const { x0, x1, y0, y1, nx, ny } = grid;
  const [cx, cy] = [k % nx, Math.floor(k / nx)];
  const at = (lo, hi, c, n) => lo + ((hi - lo) * c) / n;
  return [`Trial ${Math.ceil(at(x0, x1, cx, nx))} – ${Math.floor(at(x0, x1, cx + 1, nx))}`,
    `metric ${fmtNumber(at(y0, y1, cy, ny))} – ${fmtNumber(at(y0, y1, cy + 1, ny))}`, `${grid.counts[k]} trials`];
}

// each trial's final metric over Trial No. (points coloured by status, or their density beyond
// POINTS_ABOVE_DENSITY, with its colour scale), with the best-so-far steps; a point's tooltip shows the trial's
// parameters (once the page has them) and a click on it opens the trial
export function finalMetricPlot(el, trials, mode) {
  const done = trials.filter((t) => typeof t.final === "number");
  if (!done.length) return empty(el, "No final metric reported yet.");
  const x = done.map((t) => t.seq);
  const y = done.map((t) => t.final);
  const best = bestSoFar(done, mode);
  const bestTrace = { type: "scatter", mode: "lines", name: `best so far (${mode})`, x: best.x, y: best.y, line: { shape: "hv", color: "#f59e0b", width: 2 } };
  const steps = (f) => svg("path", { class: "best", fill: "none", stroke: "#f59e0b", "stroke-width": 2,
    d: best.x.map((v, i) => (i ? `H${f.x(v)}V${f.y(best.y[i])}` : `M${f.x(v)},${f.y(best.y[i])}`)).join("") });
  const axes = { x: { title: "Trial No.", whole: true }, y: { title: "Default metric" } };
  const bestKey = { name: bestTrace.name, color: "#f59e0b", kind: "line" };
  if (done.length > POINTS_ABOVE_DENSITY) {
    const metric = { type: "histogram2d", name: "final metric (density)", x, y, nbinsx: 60, nbinsy: 40, colorscale: DENSITY, showscale: true, colorbar: { title: { text: "trials" } } };
    const grid = cells(metric);
    return measured(el, () => svgChart(el, {
      data: [metric, bestTrace],
      x: { ...axes.x, domain: [grid.x0, grid.x1] }, y: { ...axes.y, domain: [grid.y0, grid.y1] },
      legend: [{ name: metric.name, color: "rgba(30,58,138,0.6)", kind: "box" }, bestKey],
      scale: { colorscale: DENSITY, max: grid.max, title: "trials" },
      marks: (f) => [...cellMarks(grid, f), steps(f)],
      tip: (k) => cellTip(grid, Number(k)),
    }));
  }
  const customdata = done.map((t) => [t.id, t.params === undefined ? "" : fmtParams(t.params)]);
  const colors = done.map((t) => STATUS_COLORS[t.status]);
  measured(el, () => svgChart(el, {
    data: [{ type: "scatter", mode: "markers", name: "final metric", x, y, customdata, marker: { color: colors } }, bestTrace],
    x: { ...axes.x, domain: domain(x) }, y: { ...axes.y, domain: domain([...y, ...best.y]) },
    legend: [{ name: "final metric", color: STATUS_COLORS.SUCCEEDED, kind: "dot" }, bestKey],
    marks: (f) => [...x.map((v, i) => svg("circle", { class: "point", cx: f.x(v), cy: f.y(y[i]), r: 3.5, fill: colors[i], "data-tip": i })), steps(f)],
    tip: (k) => [`Trial ${x[k]} (${customdata[k][0]})`, fmtNumber(y[k]), customdata[k][1]].filter(Boolean),
    pick: (k) => { location.hash = `#/trials/${encodeURIComponent(customdata[k][0])}`; },
  }));
}

// whole-number ticks on an axis of indices (never 0.5)
function indexAxis(maxIndex) {
  return { title: { text: "Intermediate result index" }, tickformat: "d", ...(maxIndex <= 10 ? { dtick: 1 } : {}) };
}

// the point of `xs` nearest to x
function nearest(xs, x) {
  let at = 0;
  for (let i = 1; i < xs.length; i++) if (Math.abs(xs[i] - x) < Math.abs(xs[at] - x)) at = i;
  return at;
}

// one line per trial: intermediate results against their index (whole-number ticks); a legend up to 12 trials
export function intermediatePlot(el, series, trialsById) {
  const ids = Object.keys(series).filter((id) => series[id].length);
  if (!ids.length) return empty(el, "No intermediate result matches.");
  const traces = ids.map((id, i) => {
    const trial = trialsById.get(id);
    const points = series[id];
    return {
      type: "scatter", mode: points.length > 1 ? "lines" : "markers",
      name: trial ? `#${trial.seq} ${id}` : id, seq: trial?.seq, id,
      x: points.map((p) => p[0]), y: points.map((p) => p[1]),
      line: { width: 1.5, color: COLORWAY[i % COLORWAY.length] },
    };
  });
  const line = (t, i, f) => (t.x.length > 1
    ? svg("path", { class: "trace", fill: "none", stroke: t.line.color, "stroke-width": 1.5, "data-tip": i,
      d: t.x.map((v, k) => `${k ? "L" : "M"}${f.x(v)},${f.y(t.y[k])}`).join("") })
    : svg("circle", { class: "trace", cx: f.x(t.x[0]), cy: f.y(t.y[0]), r: 3, fill: t.line.color, "data-tip": i }));
  measured(el, () => svgChart(el, {
    data: traces,
    x: { domain: domain(traces.flatMap((t) => t.x), 0.02, 1), title: "Intermediate result index", whole: true },
    y: { domain: domain(traces.flatMap((t) => t.y)), title: "Metric" },
    legend: traces.length <= 12 ? traces.map((t) => ({ name: t.name, color: t.line.color, kind: "line" })) : [],
    marks: (f) => traces.map((t, i) => line(t, i, f)),
    tip: (k, x) => {
      const t = traces[k];
      const at = nearest(t.x, x);
      return [`Trial ${t.seq ?? ""} (${t.id})`, `step ${t.x[at]}: ${fmtNumber(t.y[at])}`];
    },
  }));
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
// histogram of finished and running trials' durations (stacked, about 50 bins) beyond BARS_ABOVE_HISTOGRAM trials
export function durationPlot(el, trials, now = Date.now()) {
  const ran = trials.filter((t) => t.start);
  if (!ran.length) return empty(el, "No trial has started yet.");
  if (ran.length <= BARS_ABOVE_HISTOGRAM) {
    const x = ran.map((t) => t.seq);
    const y = ran.map((t) => trialDuration(t, now));
    const colors = ran.map((t) => STATUS_COLORS[t.status]);
    const [lo, hi] = domain(x, 0, 0);
    return measured(el, () => svgChart(el, {
      data: [{ type: "bar", x, y, customdata: ran.map((t) => `${t.id} ${t.status}`), marker: { color: colors } }],
      x: { domain: [lo - 0.5, hi + 0.5], title: "Trial No.", whole: true },
      y: { domain: [0, Math.max(...y) * 1.05 || 1], title: "Duration (s)" },
      marks: (f) => {
        const w = (f.x(1) - f.x(0)) * 0.85;
        return x.map((v, i) => svg("rect", { class: "bar", x: f.x(v) - w / 2, y: f.y(y[i]), width: w, height: f.y(0) - f.y(y[i]), fill: colors[i], "data-tip": i }));
      },
      tip: (i) => [`Trial ${x[i]} (${ran[i].id} ${ran[i].status})`, `${y[i].toFixed(1)} s`],
    }));
  }
  const finished = ran.filter((t) => t.end).map((t) => trialDuration(t, now));
  const running = ran.filter((t) => !t.end).map((t) => trialDuration(t, now));
  const all = finished.concat(running);
  const [lo, hi] = domain(all, 0, 0);
  const ticks = niceTicks(lo, hi, 50);
  const size = ticks.length > 1 ? ticks[1] - ticks[0] : 1;
  const start = Math.floor(lo / size) * size;
  const bins = Math.max(1, Math.floor((hi - start) / size) + 1);
  const count = (values) => {
    const n = new Uint32Array(bins);
    for (const v of values) n[Math.min(bins - 1, Math.floor((v - start) / size))] += 1;
    return n;
  };
  const stacks = [[`finished (${finished.length})`, count(finished), STATUS_COLORS.SUCCEEDED], [`running (${running.length})`, count(running), STATUS_COLORS.RUNNING]];
  const totals = stacks[0][1].map((n, b) => n + stacks[1][1][b]);
  measured(el, () => svgChart(el, {
    data: [{ type: "histogram", name: stacks[0][0], x: finished }, { type: "histogram", name: stacks[1][0], x: running }],
    x: { domain: [start, start + bins * size], title: "Duration (s)" },
    y: { domain: [0, Math.max(...totals) * 1.05], title: "Trials" },
    legend: stacks.map(([name, , color]) => ({ name, color, kind: "box" })),
    marks: (f) => {
      const marks = [];
      const w = f.x(start + size) - f.x(start);
      for (let b = 0; b < bins; b++) {
        let below = 0;
        stacks.forEach(([, n, color], s) => {
          if (!n[b]) return;
          marks.push(svg("rect", { class: "bar", x: f.x(start + b * size) + 0.5, y: f.y(below + n[b]), width: Math.max(1, w - 1),
            height: f.y(below) - f.y(below + n[b]), fill: color, "data-tip": `${s} ${b}` }));
          below += n[b];
        });
      }
      return marks;
    },
    tip: (key) => {
      const [s, b] = key.split(" ").map(Number);
      return [`${fmtNumber(start + b * size)} – ${fmtNumber(start + (b + 1) * size)} s`, `${stacks[s][1][b]} ${stacks[s][0].split(" ")[0]}`];
    },
  }));
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
