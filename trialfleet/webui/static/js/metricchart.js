// The final-metric chart (Overview and Charts) in SVG, without plotly.js: each trial's final metric over Trial
// No. as points (or, beyond plots.js's POINTS_ABOVE_DENSITY, their density in cells with a colour scale) and
// the best-so-far curve. A point or cell shows its tooltip when hovered; a point opens its trial when clicked.
//
// plotly.js is 1.5 MB: its evaluation alone held the main thread for 0.4 s on a quiet machine and 2 s under
// load, before a page's first chart could be drawn. The Overview's only chart is this one, so the Overview never
// loads plotly, and the Charts page draws it while plotly loads for the others.
//
// The element keeps what it shows as plotly would (`el.data`: the metric trace, `scatter` with `customdata`
// [id, parameters] or `histogram2d` with its `colorscale`, then the best-so-far `scatter`).

import { fmtNumber } from "./dom.js";
import { niceTicks } from "./parcoords.js";

const SVG = "http://www.w3.org/2000/svg";
const MARGIN = { left: 56, right: 16, top: 26, bottom: 44 };
const SCALE_WIDTH = 64; // room for the density's colour scale

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, value);
  el.append(...children);
  return el;
}

// [lo, hi] of `values` with some room on both sides (a single value gets a unit around it)
function domain(values) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (!Number.isFinite(lo)) return [0, 1];
  const pad = hi > lo ? (hi - lo) * 0.04 : 0.5;
  return [lo - pad, hi + pad];
}

function parseRgba(color) {
  const [r, g, b, a = 1] = color.match(/[\d.]+/g).map(Number);
  return [r, g, b, a];
}

// the colour at t in [0, 1] of a plotly colorscale ([[stop, "rgba(...)"], ...])
export function scaleColor(colorscale, t) {
  const stops = colorscale.map(([at, color]) => [at, parseRgba(color)]);
  let i = 0;
  while (i < stops.length - 2 && t > stops[i + 1][0]) i++;
  const [a0, c0] = stops[i];
  const [a1, c1] = stops[i + 1];
  const f = Math.min(1, Math.max(0, (t - a0) / (a1 - a0 || 1)));
  const [r, g, b, a] = c0.map((v, k) => v + (c1[k] - v) * f);
  return `rgba(${Math.round(r)},${Math.round(g)},${Math.round(b)},${+a.toFixed(3)})`;
}

// the density's cells: counts of trials per (Trial No., metric) cell, nbinsx by nbinsy over the data's range
export function cells(trace) {
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
  return { x0, x1, y0, y1, nx, ny, counts, max: Math.max(1, ...counts) };
}

function axes(group, { height, left, right, top, bottom, x, y, xTicks, yTicks }, titles) {
  for (const v of xTicks) {
    group.append(svg("line", { class: "grid", x1: x(v), x2: x(v), y1: top, y2: bottom }),
      svg("text", { x: x(v), y: bottom + 16, "text-anchor": "middle" }, fmtNumber(v)));
  }
  for (const v of yTicks) {
    group.append(svg("line", { class: "grid", x1: left, x2: right, y1: y(v), y2: y(v) }),
      svg("text", { x: left - 6, y: y(v), dy: "0.32em", "text-anchor": "end" }, fmtNumber(v)));
  }
  group.append(
    svg("line", { class: "axis-line", x1: left, x2: right, y1: bottom, y2: bottom }),
    svg("text", { class: "axis-title", x: (left + right) / 2, y: height - 6, "text-anchor": "middle" }, titles.x),
    svg("text", { class: "axis-title", transform: `translate(14,${(top + bottom) / 2}) rotate(-90)`, "text-anchor": "middle" }, titles.y));
}

function legend(metric, best, left) {
  const swatch = metric.type === "histogram2d"
    ? svg("rect", { x: 0, y: -5, width: 10, height: 10, fill: "rgba(30,58,138,0.6)" })
    : svg("circle", { cx: 5, cy: 0, r: 3.5, fill: "#16a34a" });
  return svg("g", { class: "legend", transform: `translate(${left},12)` },
    swatch, svg("text", { x: 16, dy: "0.32em" }, metric.name),
    svg("line", { x1: 170, x2: 186, y1: 0, y2: 0, stroke: best.line.color, "stroke-width": best.line.width }),
    svg("text", { x: 192, dy: "0.32em" }, best.name));
}

function colorBar(trace, grid, { right, top, bottom }) {
  const id = `scale-${Math.random().toString(36).slice(2, 8)}`;
  const stops = Array.from({ length: 11 }, (_, i) => svg("stop", { offset: `${i * 10}%`, "stop-color": scaleColor(trace.colorscale, 1 - i / 10) }));
  const left = right + 14;
  const y = (v) => bottom - (v / grid.max) * (bottom - top);
  return svg("g", { class: "colorbar" },
    svg("defs", {}, svg("linearGradient", { id, x1: 0, y1: 0, x2: 0, y2: 1 }, ...stops)),
    svg("rect", { x: left, y: top, width: 12, height: bottom - top, fill: `url(#${id})`, stroke: "#cbd5e1" }),
    ...niceTicks(0, grid.max, 4).map((v) => svg("text", { x: left + 16, y: y(v), dy: "0.32em" }, String(v))),
    svg("text", { class: "axis-title", transform: `translate(${left + 50},${(top + bottom) / 2}) rotate(90)`, "text-anchor": "middle" },
      trace.colorbar?.title?.text || ""));
}

function render(el, state) {
  const [metric, best] = state.traces;
  const dense = metric.type === "histogram2d";
  const width = Math.max(el.clientWidth, 320);
  const height = Math.max(el.clientHeight, 200);
  const left = MARGIN.left;
  const right = width - MARGIN.right - (dense ? SCALE_WIDTH : 0);
  const top = MARGIN.top;
  const bottom = height - MARGIN.bottom;
  const grid = dense ? cells(metric) : null;
  const [x0, x1] = grid ? [grid.x0, grid.x1] : domain(metric.x);
  const [y0, y1] = grid ? [grid.y0, grid.y1] : domain([...metric.y, ...best.y]);
  const x = (v) => left + ((v - x0) / (x1 - x0)) * (right - left);
  const y = (v) => bottom - ((v - y0) / (y1 - y0)) * (bottom - top);
  const frame = {
    width, height, left, right, top, bottom, x, y,
    // whole Trial Nos., about one per 100 px
    xTicks: niceTicks(x0, x1, Math.max(2, Math.floor((right - left) / 100))).filter((v) => v >= x0 && v <= x1 && Number.isInteger(v)),
    yTicks: niceTicks(y0, y1, Math.max(2, Math.floor((bottom - top) / 60))).filter((v) => v >= y0 && v <= y1),
  };
  const layer = svg("g", { class: "marks" });
  if (grid) {
    const w = (right - left) / grid.nx;
    const h = (bottom - top) / grid.ny;
    for (let cy = 0; cy < grid.ny; cy++) {
      for (let cx = 0; cx < grid.nx; cx++) {
        const n = grid.counts[cy * grid.nx + cx];
        if (!n) continue;
        layer.append(svg("rect", { class: "cell", x: left + cx * w, y: bottom - (cy + 1) * h, width: w + 0.5, height: h + 0.5,
          fill: scaleColor(metric.colorscale, n / grid.max), "data-cell": cy * grid.nx + cx }));
      }
    }
  } else {
    const colors = metric.marker.color;
    for (let i = 0; i < metric.x.length; i++) {
      layer.append(svg("circle", { class: "point", cx: x(metric.x[i]), cy: y(metric.y[i]), r: 3.5, fill: colors[i] ?? colors, "data-i": i }));
    }
  }
  let d = "";
  best.x.forEach((v, i) => { d += i ? `H${x(v)}V${y(best.y[i])}` : `M${x(v)},${y(best.y[i])}`; });
  const chart = svg("svg", { class: "metric-chart-svg", width, height });
  axes(chart, frame, state.titles);
  chart.append(layer, svg("path", { class: "best", d, stroke: best.line.color, "stroke-width": best.line.width, fill: "none" }),
    legend(metric, best, left));
  if (grid) chart.append(colorBar(metric, grid, frame));
  state.grid = grid;
  state.width = el.clientWidth;
  state.box.replaceChildren(chart, state.tip);
}

// what the tooltip of a hovered point or cell says
function tipOf(state, target) {
  const metric = state.traces[0];
  if (target.dataset.i !== undefined) {
    const i = Number(target.dataset.i);
    const [id, params] = metric.customdata[i];
    return [`Trial ${metric.x[i]} (${id})`, fmtNumber(metric.y[i]), params].filter(Boolean);
  }
  const { x0, x1, y0, y1, nx, ny, counts } = state.grid;
  const k = Number(target.dataset.cell);
  const [cx, cy] = [k % nx, Math.floor(k / nx)];
  const at = (lo, hi, c, n) => lo + ((hi - lo) * c) / n;
  return [`Trial ${Math.ceil(at(x0, x1, cx, nx))} – ${Math.floor(at(x0, x1, cx + 1, nx))}`,
    `metric ${fmtNumber(at(y0, y1, cy, ny))} – ${fmtNumber(at(y0, y1, cy + 1, ny))}`, `${counts[k]} trials`];
}

// draw the final-metric chart `traces` ([metric, best so far]) in `el`, replacing what it showed; `onPick(id)`
// when a point is clicked
export function metricChart(el, traces, { xTitle, yTitle, onPick }) {
  let state = el._metricChart;
  if (!state) {
    const box = document.createElement("div");
    box.className = "metric-chart";
    const tip = document.createElement("div");
    tip.className = "chart-tip";
    tip.hidden = true;
    el.replaceChildren(box);
    state = { box, tip, width: 0 };
    box.addEventListener("pointerover", (event) => {
      const mark = event.target.closest?.(".point, .cell");
      if (!mark) return;
      tip.replaceChildren(...tipOf(state, mark).flatMap((line, i) => (i ? [document.createElement("br"), line] : [line])));
      const bounds = box.getBoundingClientRect();
      const at = mark.getBoundingClientRect();
      tip.style.left = `${Math.min(at.right - bounds.left + 6, bounds.width - 220)}px`;
      tip.style.top = `${Math.max(0, at.top - bounds.top - 8)}px`;
      tip.hidden = false;
    });
    box.addEventListener("pointerout", (event) => {
      if (event.target.closest?.(".point, .cell")) tip.hidden = true;
    });
    box.addEventListener("click", (event) => {
      const point = event.target.closest?.(".point");
      if (point) state.onPick?.(state.traces[0].customdata[Number(point.dataset.i)][0]);
    });
    state.resize = new ResizeObserver(() => {
      if (state.traces && el.clientWidth !== state.width) render(el, state);
    });
    state.resize.observe(el);
    el._metricChart = state;
  }
  state.traces = traces;
  state.titles = { x: xTitle, y: yTitle };
  state.onPick = onPick;
  el.data = traces;
  render(el, state);
}

// forget a final-metric chart: its observer, its drawing and its data
export function releaseMetricChart(el) {
  if (!el?._metricChart) return false;
  el._metricChart.resize.disconnect();
  delete el._metricChart;
  delete el.data;
  el.replaceChildren();
  return true;
}
