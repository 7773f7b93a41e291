// Parallel coordinates without WebGL: the axes, labels and brushes are SVG, the trials' lines one 2D canvas.
//
// plotly.js draws parcoords only on WebGL. Without a GPU (a headless browser, a remote desktop, a browser
// that refuses software WebGL) its first draw compiled shaders and read back pixels for 0.9 s of main
// thread at 100 trials, and each redraw took 110 ms; where WebGL is missing it draws nothing. A 2D canvas
// draws the same 100 lines in a few milliseconds, and 10,000 in tens of them.
//
// The element keeps what it shows as plotly does (`el.data[0]`: `dimensions` with `label` and `values`,
// `customdata`, `line.color`, and `constraintrange` on a brushed axis), so the page reads the axis order back
// the same way. Drag an axis's title to
// move it; drag along an axis to keep only the lines crossing that range (a click on the axis clears it).
//
// Three layers: every line faded (drawn once per drawing, shown while a brush is on), the kept lines in
// colour (what a brush move redraws) and the SVG axes. Up to RASTER_ABOVE lines are stroked by the canvas
// (antialiased); beyond, `rasterize` sets them into the canvas's pixels (one device pixel wide, not
// antialiased, the highest colour on top): without a GPU, Chromium rasterised 6,500-10,000 stroked lines in
// 80-150 ms of main thread at the next frame, this loop sets them in 5-10 ms (quiet machine).
// `python -m bench.webui_brush` times a brush move at 10,000 lines.

import { fmtNumber } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const MARGIN = { left: 72, right: 84, top: 44, bottom: 24 };
// plotly's Viridis, as 9 even stops
const VIRIDIS = ["#440154", "#472c7a", "#3b518b", "#2c718e", "#21908d", "#27ad81", "#5cc863", "#aadc32", "#fde725"];
const SHADES = 32; // lines are stroked in this many colour groups: one path per group, not per trial
const FADED = "rgba(148, 163, 184, 0.25)";
const RASTER_ABOVE = 1000; // more lines than this are rasterised by `rasterize`, not stroked

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, value);
  el.append(...children);
  return el;
}

function hexToRgb(hex) {
  const n = parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

// [r, g, b] at t in [0, 1] of the Viridis scale
function viridisRgb(t) {
  const x = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x));
  const a = hexToRgb(VIRIDIS[i]);
  const b = hexToRgb(VIRIDIS[i + 1]);
  const f = x - i;
  return a.map((v, k) => Math.round(v + (b[k] - v) * f));
}

// the colour at t in [0, 1] of the Viridis scale
export function viridis(t) {
  return `rgb(${viridisRgb(t).join(",")})`;
}

// an ImageData pixel (RGBA bytes, read as one little-endian 32-bit word)
function pixel([r, g, b], alpha) {
  return ((Math.round(alpha * 255) << 24) | (b << 16) | (g << 8) | r) >>> 0;
}

// a pixel's colour by its value in `rasterize`'s buffer (0: no line, else the colour group + 1), kept and faded
const KEPT_PIXELS = Uint32Array.from({ length: SHADES + 1 }, (_, g) => (g ? pixel(viridisRgb((g - 0.5) / SHADES), 0.8) : 0));
const FADED_PIXELS = Uint32Array.from({ length: SHADES + 1 }, (_, g) => (g ? pixel([148, 163, 184], 0.35) : 0));

// about `count` round numbers covering [lo, hi]
export function niceTicks(lo, hi, count = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => raw <= s);
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(+v.toPrecision(12));
  return ticks;
}

function extent(dim) {
  const values = [...dim.values, ...(dim.tickvals || [])];
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  if (!Number.isFinite(lo)) return [0, 1];
  if (lo === hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  return [lo, hi];
}

// the lines kept by every axis's brush
export function selected(dims, brushes) {
  const count = dims.length ? dims[0].values.length : 0;
  const keep = new Uint8Array(count).fill(1);
  for (const dim of dims) {
    const range = brushes.get(dim.label);
    if (!range) continue;
    const values = dim.values;
    for (let i = 0; i < count; i++) if (!(values[i] >= range[0] && values[i] <= range[1])) keep[i] = 0;
  }
  return keep;
}

function layoutOf(el, trace) {
  const width = Math.max(el.clientWidth, 320);
  const height = Math.max(el.clientHeight, 200);
  const dims = trace.dimensions;
  const inner = width - MARGIN.left - MARGIN.right;
  const x = dims.map((_, i) => MARGIN.left + (dims.length > 1 ? (inner * i) / (dims.length - 1) : inner / 2));
  const scales = dims.map((dim) => {
    const [lo, hi] = extent(dim);
    const top = MARGIN.top;
    const span = height - MARGIN.top - MARGIN.bottom;
    return { lo, hi, y: (v) => top + (1 - (v - lo) / (hi - lo)) * span, value: (y) => lo + (1 - (y - top) / span) * (hi - lo) };
  });
  return { width, height, x, scales };
}

// What a brush move needs, computed once per drawing of the axes: every line's y on every axis and its
// colour group (the lines of each group, in order)
function linesOf(trace, geometry) {
  const dims = trace.dimensions;
  const count = dims.length ? dims[0].values.length : 0;
  const ys = new Float32Array(count * dims.length);
  dims.forEach((dim, d) => {
    const y = geometry.scales[d].y;
    for (let i = 0; i < count; i++) ys[i * dims.length + d] = y(dim.values[i]);
  });
  const colors = trace.line.color;
  const [cLo, cHi] = extent({ values: colors });
  const groups = Array.from({ length: SHADES }, () => []);
  const shade = new Uint8Array(count); // colour group + 1
  for (let i = 0; i < count; i++) {
    let t = (colors[i] - cLo) / (cHi - cLo);
    if (trace.line.reversescale) t = 1 - t;
    const g = Math.min(SHADES - 1, Math.max(0, Math.floor(t * SHADES)));
    groups[g].push(i);
    shade[i] = g + 1;
  }
  const members = groups.map((g) => Int32Array.from(g));
  const order = new Int32Array(count); // the lines, group after group
  members.reduce((at, g) => (order.set(g, at), at + g.length), 0);
  return { count, axes: dims.length, ys, shade, order, groups: members };
}

// The pixels of a canvas that lines are rasterised into, in device pixels: `shades` holds each pixel's
// highest colour group + 1 (0 where no line crosses it)
function rasterOf(geometry) {
  const ratio = window.devicePixelRatio || 1;
  const width = Math.round(geometry.width * ratio);
  const height = Math.round(geometry.height * ratio);
  const xs = Int32Array.from(geometry.x, (x) => Math.min(width - 1, Math.max(0, Math.round(x * ratio))));
  return { ratio, width, height, xs, shades: new Uint8Array(width * height), image: new ImageData(width, height) };
}

// Set the lines `keep` keeps (all without it) into `buffer`, one device pixel wide, in the order of their
// colour groups: each pixel takes the colour group + 1 of the last (highest) line crossing it. A segment
// between two axes steps one pixel at a time along its longer side, in 16.16 fixed point along the other.
export function rasterize(lines, raster, buffer, keep) {
  const { ys, axes, shade, order } = lines;
  const { ratio, width, height, xs } = raster;
  const bottom = height - 1;
  for (let j = 0; j < order.length; j++) {
    const i = order[j];
    if (keep && !keep[i]) continue;
    const g = shade[i];
    const at = i * axes;
    for (let d = 0; d + 1 < axes; d++) {
      const ya = ys[at + d] * ratio;
      const yb = ys[at + d + 1] * ratio;
      if (!(ya >= 0 && yb >= 0)) continue; // a value missing (NaN)
      const x0 = xs[d];
      const across = xs[d + 1] - x0;
      const y0 = (Math.min(bottom, ya) * 65536) | 0;
      const y1 = (Math.min(bottom, yb) * 65536) | 0;
      const rows = Math.abs((y1 >> 16) - (y0 >> 16));
      if (rows <= across) { // one pixel per column
        if (!across) continue;
        const step = ((y1 - y0) / across) | 0;
        const end = x0 + across;
        for (let x = x0, y = y0; x < end; x++, y += step) {
          buffer[(y >> 16) * width + x] = g;
        }
      } else { // one pixel per row
        const step = ((across * 65536) / rows) | 0;
        const next = y1 > y0 ? width : -width;
        for (let s = 0, x = x0 * 65536 + 32768, row = (y0 >> 16) * width; s < rows; s++, x += step, row += next) {
          buffer[row + (x >> 16)] = g;
        }
      }
    }
  }
}

// show `buffer` on `ctx`'s canvas through `pixels` (a colour by buffer value)
function paint(ctx, raster, buffer, pixels) {
  const out = new Uint32Array(raster.image.data.buffer);
  for (let k = 0; k < buffer.length; k++) out[k] = pixels[buffer[k]];
  ctx.putImageData(raster.image, 0, 0);
}

// size a canvas to the chart (which clears it); returns its context, in CSS pixels
function sized(canvas, { width, height }) {
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  // a line one device pixel wide or less is stroked as a hairline: 10,000 lines in a few milliseconds, where
  // 1.2 px took the stroker seconds (every line's joins and overlaps)
  ctx.lineWidth = 1 / ratio;
  return ctx;
}

// one path of the given lines (those `keep` keeps, when given)
function trace2d(ctx, lines, x, members, keep) {
  const { ys, axes } = lines;
  ctx.beginPath();
  for (const i of members) {
    if (keep && !keep[i]) continue;
    const at = i * axes;
    ctx.moveTo(x[0], ys[at]);
    for (let d = 1; d < axes; d++) ctx.lineTo(x[d], ys[at + d]);
  }
  ctx.stroke();
}

// every line, faded, drawn once per drawing of the axes: the layer under the kept lines while a brush is on
function drawFaded(state, geometry) {
  const ctx = sized(state.faded, geometry);
  const raster = state.raster;
  if (raster) { // one flat shade where any line is: at this many lines the stroked layer is nearly flat too
    raster.shades.fill(0);
    rasterize(state.lines, raster, raster.shades, null);
    paint(ctx, raster, raster.shades, FADED_PIXELS);
    return;
  }
  ctx.strokeStyle = FADED;
  for (const members of state.lines.groups) trace2d(ctx, state.lines, geometry.x, members);
}

// every line kept by `keep` was kept by `before` too: a brush that only grew
function grew(before, keep) {
  if (!before || !keep || before.length !== keep.length) return false;
  for (let i = 0; i < keep.length; i++) if (before[i] > keep[i]) return false;
  return true;
}

// the lines every brush keeps, in their colours, over the faded layer (all of them while nothing is brushed):
// what a brush move redraws. Stroked, a brush that only grew adds the lines it now keeps over those already
// drawn; rasterised, every kept line is set again (a few milliseconds at 10,000 lines).
function drawKept(state, geometry) {
  const { width, height, x } = geometry;
  const ctx = state.ctx;
  const brushed = state.brushes.size > 0;
  const keep = brushed ? selected(state.trace.dimensions, state.brushes) : null;
  const before = state.keep;
  state.keep = keep;
  if (brushed && !state.fadedDrawn) {
    drawFaded(state, geometry);
    state.fadedDrawn = true;
  }
  state.faded.style.visibility = brushed ? "visible" : "hidden";
  let kept = 0;
  if (keep) for (let i = 0; i < keep.length; i++) kept += keep[i];
  state.note.textContent = brushed ? `${kept} of ${state.lines.count} trials in the brushed ranges (click an axis to clear)` : "";
  const raster = state.raster;
  if (raster) {
    raster.shades.fill(0);
    rasterize(state.lines, raster, raster.shades, keep);
    paint(ctx, raster, raster.shades, KEPT_PIXELS);
    return;
  }
  const only = grew(before, keep) ? keep.map((k, i) => k & (before[i] ^ 1)) : null;
  if (!only) ctx.clearRect(0, 0, width, height);
  ctx.globalAlpha = 0.8;
  state.lines.groups.forEach((members, g) => {
    if (!members.length) return;
    ctx.strokeStyle = viridis((g + 0.5) / SHADES);
    trace2d(ctx, state.lines, x, members, only || keep);
  });
  ctx.globalAlpha = 1;
}

function axisTicks(dim, scale) {
  if (dim.tickvals) return dim.tickvals.map((v, i) => [v, String(dim.ticktext?.[i] ?? v)]);
  return niceTicks(scale.lo, scale.hi).map((v) => [v, fmtNumber(v)]);
}

// follow a pointer pressed on `target`: `move` with each move, `end` once it is released or the browser takes
// it away
function drag(target, down, move, end) {
  down.preventDefault();
  target.setPointerCapture(down.pointerId);
  const finish = () => {
    target.removeEventListener("pointermove", move);
    target.removeEventListener("pointerup", finish);
    target.removeEventListener("pointercancel", finish);
    end();
  };
  target.addEventListener("pointermove", move);
  target.addEventListener("pointerup", finish);
  target.addEventListener("pointercancel", finish);
}

function drawAxes(layer, trace, geometry, brushes, onChange) {
  const { height, x, scales } = geometry;
  const bottom = height - MARGIN.bottom;
  const axes = trace.dimensions.map((dim, d) => {
    const scale = scales[d];
    const ticks = axisTicks(dim, scale).filter(([v]) => v >= scale.lo && v <= scale.hi);
    const brush = brushes.get(dim.label);
    const band = svg("rect", { class: "brush", x: -6, width: 12, visibility: brush ? "visible" : "hidden" });
    const placeBand = (lo, hi) => {
      const y0 = scale.y(hi);
      band.setAttribute("y", y0);
      band.setAttribute("height", Math.max(1, scale.y(lo) - y0));
      band.setAttribute("visibility", "visible");
    };
    if (brush) placeBand(...brush);
    const hit = svg("rect", { class: "axis-hit", x: -12, y: MARGIN.top, width: 24, height: bottom - MARGIN.top });
    const title = svg("text", { class: "axis-title", y: MARGIN.top - 18, "text-anchor": "middle" }, dim.label);
    const axis = svg("g", { class: "y-axis", transform: `translate(${x[d]},0)`, "data-label": dim.label },
      svg("line", { class: "axis-line", y1: MARGIN.top, y2: bottom }),
      ...ticks.map(([v, text]) => svg("g", { transform: `translate(0,${scale.y(v)})` },
        svg("line", { x2: -4, class: "axis-line" }),
        svg("text", { x: -7, dy: "0.32em", "text-anchor": "end" }, text))),
      band, hit, title);

    // drag along the axis: keep the lines crossing that range; a click clears it
    hit.addEventListener("pointerdown", (down) => {
      const top = layer.getBoundingClientRect().top;
      const along = (event) => scale.value(Math.min(bottom, Math.max(MARGIN.top, event.clientY - top)));
      const start = along(down);
      let moved = false;
      drag(hit, down, (event) => {
        if (Math.abs(event.clientY - down.clientY) < 3 && !moved) return;
        moved = true;
        const end = along(event);
        dim.constraintrange = [Math.min(start, end), Math.max(start, end)];
        brushes.set(dim.label, dim.constraintrange);
        placeBand(...dim.constraintrange);
        onChange(false);
      }, () => {
        if (moved) return;
        brushes.delete(dim.label);
        delete dim.constraintrange;
        band.setAttribute("visibility", "hidden");
        onChange(false);
      });
    });

    // drag the title sideways: the axis moves to where it is dropped
    title.addEventListener("pointerdown", (down) => {
      let dx = 0;
      drag(title, down, (event) => {
        dx = event.clientX - down.clientX;
        axis.setAttribute("transform", `translate(${x[d] + dx},0)`);
      }, () => {
        const order = trace.dimensions.map((dimension, i) => [i === d ? x[d] + dx : x[i], dimension]);
        order.sort((a, b) => a[0] - b[0]);
        trace.dimensions = order.map(([, dimension]) => dimension);
        onChange(true);
      });
    });
    return axis;
  });
  layer.replaceChildren(...axes, colorBar(trace, geometry));
}

function colorBar(trace, { width, height }) {
  const [lo, hi] = extent({ values: trace.line.color });
  const top = trace.line.reversescale ? VIRIDIS : [...VIRIDIS].reverse(); // from the highest metric's colour
  const stops = top.map((c, i) => svg("stop", { offset: `${(i / (top.length - 1)) * 100}%`, "stop-color": c }));
  const left = width - MARGIN.right + 44;
  const bottom = height - MARGIN.bottom;
  return svg("g", { class: "colorbar", transform: `translate(${left},0)` },
    svg("defs", {}, svg("linearGradient", { id: `${trace.uid}-scale`, x1: 0, y1: 0, x2: 0, y2: 1 }, ...stops)),
    svg("rect", { y: MARGIN.top, width: 12, height: bottom - MARGIN.top, fill: `url(#${trace.uid}-scale)` }),
    svg("text", { x: 16, y: MARGIN.top, dy: "0.32em" }, fmtNumber(hi)),
    svg("text", { x: 16, y: bottom, dy: "0.32em" }, fmtNumber(lo)));
}

let uids = 0;

// draw `trace` ({ dimensions: [{ label, values, tickvals?, ticktext? }], customdata, line: { color,
// reversescale } }) in `el`, replacing what it showed; brushes on axes that are still shown are kept
export function parcoords(el, trace) {
  let state = el._parcoords;
  if (!state) {
    const faded = document.createElement("canvas");
    const canvas = document.createElement("canvas");
    const layer = svg("svg", { class: "parcoords-axes" });
    const box = document.createElement("div");
    box.className = "parcoords";
    box.append(faded, canvas, layer);
    el.replaceChildren(box);
    const note = document.createElement("div");
    note.className = "parcoords-note muted small";
    box.append(note);
    state = { faded, canvas, layer, note, brushes: new Map(), trace: null, width: 0 };
    state.resize = new ResizeObserver(() => {
      if (state.trace && el.clientWidth !== state.width) render(el, state);
    });
    state.resize.observe(el);
    el._parcoords = state;
  }
  trace.uid ??= `parcoords-${++uids}`;
  const labels = new Set(trace.dimensions.map((d) => d.label));
  for (const label of [...state.brushes.keys()]) if (!labels.has(label)) state.brushes.delete(label);
  for (const dim of trace.dimensions) { // plotly's name for an axis's brushed range
    if (state.brushes.has(dim.label)) dim.constraintrange = state.brushes.get(dim.label);
  }
  state.trace = trace;
  el.data = [trace];
  render(el, state);
}

// draw everything again (new data, another size or axis order): the lines' positions, both canvases, the axes.
// A brush move redraws the kept lines only.
function render(el, state) {
  const geometry = layoutOf(el, state.trace);
  state.width = el.clientWidth;
  state.layer.setAttribute("width", geometry.width);
  state.layer.setAttribute("height", geometry.height);
  state.lines = linesOf(state.trace, geometry);
  state.raster = state.lines.count > RASTER_ABOVE ? rasterOf(geometry) : null;
  state.ctx = sized(state.canvas, geometry);
  state.fadedDrawn = false;
  state.keep = null;
  drawKept(state, geometry);
  drawAxes(state.layer, state.trace, geometry, state.brushes,
    (reordered) => (reordered ? render(el, state) : drawKept(state, geometry)));
}

// forget a parallel-coordinates plot: its observer, its drawing and its data
export function releaseParcoords(el) {
  if (!el?._parcoords) return false;
  el._parcoords.resize.disconnect();
  delete el._parcoords;
  delete el.data;
  el.replaceChildren();
  return true;
}
