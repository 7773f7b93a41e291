// The Charts page's and the Overview's charts in SVG, without plotly.js: a frame (grid, ticks, axis titles, a
// legend, an optional colour scale) around marks that plots.js's builders make (points, lines, bars, density
// cells). A mark with `data-tip` shows its tooltip when hovered and is picked when clicked.
//
// plotly.js is 1.5 MB: evaluating it held the main thread for 0.3-0.45 s in one task on a quiet machine and
// 2 s under load, before a page's first chart could be drawn. The Overview and Charts pages never load it;
// only a trial's drawer and the comparison (plots.js's trialCurvesPlot) do.
//
// The element keeps what it shows as plotly would (`el.data`: the traces, with their x and y), so a page, a test
// or a benchmark reads a chart's data the same way whatever draws it.

import { fmtNumber } from "./dom.js";
import { niceTicks } from "./parcoords.js";

const SVG = "http://www.w3.org/2000/svg";
const MARGIN = { left: 60, right: 16, top: 26, bottom: 44 };
const SCALE_WIDTH = 64; // room for a colour scale
const LEGEND_ROW = 18;
// plotly's default trace colours
export const COLORWAY = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, value);
  el.append(...children);
  return el;
}

// [lo, hi] of `values` with `pad` of their span on both sides (a single value gets `unit` around it)
export function domain(values, pad = 0.04, unit = 0.5) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (!Number.isFinite(lo)) return [0, 1];
  const room = hi > lo ? (hi - lo) * pad : unit;
  return [lo - room, hi + room];
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

function axes(group, frame, spec) {
  const { height, left, right, top, bottom, x, y } = frame;
  for (const v of frame.xTicks) {
    group.append(svg("line", { class: "grid", x1: x(v), x2: x(v), y1: top, y2: bottom }),
      svg("text", { class: "x-tick", x: x(v), y: bottom + 16, "text-anchor": "middle" }, fmtNumber(v)));
  }
  for (const v of frame.yTicks) {
    group.append(svg("line", { class: "grid", x1: left, x2: right, y1: y(v), y2: y(v) }),
      svg("text", { class: "y-tick", x: left - 6, y: y(v), dy: "0.32em", "text-anchor": "end" }, fmtNumber(v)));
  }
  group.append(
    svg("line", { class: "axis-line", x1: left, x2: right, y1: bottom, y2: bottom }),
    svg("text", { class: "axis-title", x: (left + right) / 2, y: height - 6, "text-anchor": "middle" }, spec.x.title),
    svg("text", { class: "axis-title", transform: `translate(14,${(top + bottom) / 2}) rotate(-90)`, "text-anchor": "middle" }, spec.y.title));
}

// the legend's entries in rows above the plot
function legend(entries, left, right) {
  const group = svg("g", { class: "legend" });
  let at = 0;
  let row = 0;
  for (const { name, color, kind } of entries) {
    const width = 28 + 6.5 * name.length;
    if (at && left + at + width > right) {
      at = 0;
      row += 1;
    }
    const swatch = kind === "line"
      ? svg("line", { x1: 0, x2: 16, y1: 0, y2: 0, stroke: color, "stroke-width": 2 })
      : kind === "dot" ? svg("circle", { cx: 8, cy: 0, r: 3.5, fill: color }) : svg("rect", { x: 3, y: -5, width: 10, height: 10, fill: color });
    group.append(svg("g", { transform: `translate(${left + at},${12 + row * LEGEND_ROW})` }, swatch,
      svg("text", { x: 22, dy: "0.32em" }, name)));
    at += width;
  }
  return { group, rows: entries.length ? row + 1 : 0 };
}

function colorBar({ colorscale, max, title }, { right, top, bottom }) {
  const id = `scale-${Math.random().toString(36).slice(2, 8)}`;
  const stops = Array.from({ length: 11 }, (_, i) => svg("stop", { offset: `${i * 10}%`, "stop-color": scaleColor(colorscale, 1 - i / 10) }));
  const left = right + 14;
  const y = (v) => bottom - (v / max) * (bottom - top);
  return svg("g", { class: "colorbar" },
    svg("defs", {}, svg("linearGradient", { id, x1: 0, y1: 0, x2: 0, y2: 1 }, ...stops)),
    svg("rect", { x: left, y: top, width: 12, height: bottom - top, fill: `url(#${id})`, stroke: "#cbd5e1" }),
    ...niceTicks(0, max, 4).map((v) => svg("text", { x: left + 16, y: y(v), dy: "0.32em" }, String(v))),
    svg("text", { class: "axis-title", transform: `translate(${left + 50},${(top + bottom) / 2}) rotate(90)`, "text-anchor": "middle" }, title));
}

function render(el, state) {
  const spec = state.spec;
  const width = Math.max(el.clientWidth, 320);
  const height = Math.max(el.clientHeight, 200);
  const left = MARGIN.left;
  const right = width - MARGIN.right - (spec.scale ? SCALE_WIDTH : 0);
  const key = legend(spec.legend || [], left, right);
  const top = MARGIN.top + Math.max(0, key.rows - 1) * LEGEND_ROW - (key.rows ? 0 : 14);
  const bottom = height - MARGIN.bottom;
  const [x0, x1] = state.zoom?.x || spec.x.domain;
  const [y0, y1] = state.zoom?.y || spec.y.domain;
  const frame = {
    width, height, left, right, top, bottom,
    x: (v) => left + ((v - x0) / (x1 - x0)) * (right - left),
    y: (v) => bottom - ((v - y0) / (y1 - y0)) * (bottom - top),
    xAt: (px) => x0 + ((px - left) / (right - left)) * (x1 - x0),
    yAt: (py) => y0 + ((bottom - py) / (bottom - top)) * (y1 - y0),
    // about one tick per 100 px across and 45 px up; whole numbers only on an axis of whole numbers
    xTicks: niceTicks(x0, x1, Math.max(2, Math.floor((right - left) / 100))).filter((v) => v >= x0 && v <= x1 && (!spec.x.whole || Number.isInteger(v))),
    yTicks: niceTicks(y0, y1, Math.max(3, Math.floor((bottom - top) / 45))).filter((v) => v >= y0 && v <= y1),
  };
  const chart = svg("svg", { width, height });
  axes(chart, frame, spec);
  // marks outside a zoomed plot area are cut at its edges
  state.clip ||= `plot-${Math.random().toString(36).slice(2, 8)}`;
  const area = svg("clipPath", { id: state.clip }, svg("rect", { x: left, y: top - 4, width: right - left, height: bottom - top + 8 }));
  chart.append(svg("defs", {}, area), svg("g", { class: "marks", "clip-path": `url(#${state.clip})` }, ...spec.marks(frame)), key.group);
  if (spec.scale) chart.append(colorBar(spec.scale, frame));
  state.frame = frame;
  state.width = el.clientWidth;
  state.box.replaceChildren(chart, state.tip, state.reset);
  state.reset.hidden = !state.zoom;
}

// a drag over the plot area zooms into its rectangle; a double click (or "Reset zoom") goes back. The zoom is the
// chart's own: a redraw with new data keeps it.
const DRAG_MIN = 6; // pixels a drag must span on an axis before it zooms that axis

function zoomByDrag(el, state) {
  let from = null;
  let band = null;
  const at = (event) => {
    const box = state.box.getBoundingClientRect();
    return [event.clientX - box.left, event.clientY - box.top];
  };
  state.box.addEventListener("pointerdown", (event) => {
    const f = state.frame;
    const [px, py] = at(event);
    if (event.button !== 0 || !f || px < f.left || px > f.right || py < f.top || py > f.bottom) return;
    from = [px, py];
    state.dragged = false;
  });
  state.box.addEventListener("pointermove", (event) => {
    if (!from) return;
    const [px, py] = at(event);
    if (!state.dragged && Math.abs(px - from[0]) < DRAG_MIN && Math.abs(py - from[1]) < DRAG_MIN) return;
    if (!state.dragged) state.box.setPointerCapture?.(event.pointerId);
    state.dragged = state.dragging = true;
    state.tip.hidden = true;
    const f = state.frame;
    const x = Math.min(Math.max(px, f.left), f.right);
    const y = Math.min(Math.max(py, f.top), f.bottom);
    band ||= svg("rect", { class: "zoom-band" });
    const [bx, by] = [Math.min(x, from[0]), Math.min(y, from[1])];
    for (const [k, v] of Object.entries({ x: bx, y: by, width: Math.abs(x - from[0]), height: Math.abs(y - from[1]) })) band.setAttribute(k, v);
    state.box.querySelector("svg")?.append(band);
  });
  const end = (event) => {
    if (!from) return;
    const start = from;
    from = null;
    state.dragging = false;
    band?.remove();
    band = null;
    if (!state.dragged || event.type === "pointercancel") return;
    const f = state.frame;
    const [px, py] = at(event);
    const x = Math.min(Math.max(px, f.left), f.right);
    const y = Math.min(Math.max(py, f.top), f.bottom);
    const xs = [f.xAt(Math.min(x, start[0])), f.xAt(Math.max(x, start[0]))];
    const ys = [f.yAt(Math.max(y, start[1])), f.yAt(Math.min(y, start[1]))];
    const x0 = state.zoom?.x || state.spec.x.domain;
    const y0 = state.zoom?.y || state.spec.y.domain;
    state.zoom = {
      x: Math.abs(x - start[0]) >= DRAG_MIN ? xs : x0,
      y: Math.abs(y - start[1]) >= DRAG_MIN ? ys : y0,
    };
    render(el, state);
  };
  state.box.addEventListener("pointerup", end);
  state.box.addEventListener("pointercancel", end);
  state.box.addEventListener("dblclick", () => resetZoom(el, state));
}

function resetZoom(el, state) {
  if (!state.zoom) return;
  state.zoom = null;
  render(el, state);
}

function showTip(state, mark, event) {
  const box = state.box.getBoundingClientRect();
  const lines = state.spec.tip(mark.dataset.tip, state.frame.xAt(event.clientX - box.left));
  state.tip.replaceChildren(...lines.flatMap((line, i) => (i ? [document.createElement("br"), line] : [line])));
  state.tip.style.left = `${Math.max(0, Math.min(event.clientX - box.left + 12, box.width - 230))}px`;
  state.tip.style.top = `${Math.max(0, event.clientY - box.top - 12)}px`;
  state.tip.hidden = false;
}

// Draw `spec` in `el`, replacing what it showed: { data (kept as el.data), x and y: { domain: [lo, hi], title,
// whole (x: whole-number ticks) }, marks(frame) → SVG elements (frame.x and frame.y place a value),
// legend: [{ name, color, kind: "dot" | "line" | "box" }], scale: { colorscale, max, title } (a colour scale),
// tip(key, x) → the lines of the tooltip of the mark whose data-tip is key (x: where the pointer is, in data
// units), pick(key) on a click }. A drag over the plot zooms into its rectangle (el._svgChart.zoom, kept across
// redraws); a double click or the "Reset zoom" button shows the whole data again.
export function svgChart(el, spec) {
  let state = el._svgChart;
  if (!state) {
    const box = document.createElement("div");
    box.className = "svg-chart";
    const tip = document.createElement("div");
    tip.className = "chart-tip";
    tip.hidden = true;
    el.replaceChildren(box);
    state = { box, tip, width: 0 };
    const hovered = (event) => event.target.closest?.("[data-tip]");
    box.addEventListener("pointermove", (event) => {
      if (state.dragging) return;
      const mark = hovered(event);
      if (mark) showTip(state, mark, event);
      else state.tip.hidden = true;
    });
    box.addEventListener("pointerleave", () => { state.tip.hidden = true; });
    box.addEventListener("click", (event) => {
      const mark = hovered(event);
      if (mark && !state.dragged) state.spec.pick?.(mark.dataset.tip);
      state.dragged = false;
    });
    state.reset = document.createElement("button");
    state.reset.type = "button";
    state.reset.className = "zoom-reset";
    state.reset.textContent = "Reset zoom";
    state.reset.hidden = true;
    state.reset.addEventListener("click", () => resetZoom(el, state));
    zoomByDrag(el, state);
    state.resize = new ResizeObserver(() => {
      if (state.spec && el.clientWidth !== state.width) render(el, state);
    });
    state.resize.observe(el);
    el._svgChart = state;
  }
  state.spec = spec;
  el.data = spec.data;
  render(el, state);
}

// forget a chart: its observer, its drawing and its data
export function releaseSvgChart(el) {
  if (!el?._svgChart) return false;
  el._svgChart.resize.disconnect();
  delete el._svgChart;
  delete el.data;
  el.replaceChildren();
  return true;
}
