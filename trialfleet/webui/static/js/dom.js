// Small DOM and formatting helpers shared by every page.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2).toLowerCase(), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key in el && key !== "list" && key !== "type") el[key] = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export const TRIAL_STATUSES = [
  "WAITING", "RUNNING", "SUCCEEDED", "FAILED", "USER_CANCELED", "SYS_CANCELED", "EARLY_STOPPED", "UNKNOWN",
];
export const LIVE = new Set(["WAITING", "RUNNING", "UNKNOWN"]);

// one colour per status, used by badges, chips and charts alike
export const STATUS_COLORS = {
  WAITING: "#64748b", RUNNING: "#2563eb", SUCCEEDED: "#16a34a", FAILED: "#dc2626",
  USER_CANCELED: "#d97706", SYS_CANCELED: "#b45309", EARLY_STOPPED: "#7c3aed", UNKNOWN: "#6b7280",
  INITIALIZED: "#64748b", DONE: "#16a34a", ERROR: "#dc2626", STOPPING: "#d97706", STOPPED: "#6b7280",
  NO_MORE_TRIAL: "#0d9488", TUNER_NO_MORE_TRIAL: "#0d9488", VIEWED: "#475569",
};

export function badge(status) {
  const color = STATUS_COLORS[status] || "#6b7280";
  return h("span", { className: "badge", style: `--c:${color}`, dataset: { status } }, status.replace(/_/g, " "));
}

export function fmtTime(ms) {
  if (!ms) return "–";
  const d = new Date(ms);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// month-day and time only: tables have no room for the year
export function fmtShortTime(ms) {
  return ms ? fmtTime(ms).slice(5) : "–";
}

export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "–";
  let s = Math.max(0, Math.round(seconds));
  const parts = [];
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]]) {
    const n = Math.floor(s / size);
    s -= n * size;
    if (n) parts.push(`${n}${unit}`);
  }
  return parts.length ? parts.slice(0, 3).join(" ") : "0s";
}

/** A trial's parameters are usually a record of named values; NNI's BatchTuner hands out bare values. */
export function isRecord(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

export function fmtParams(params) {
  if (!isRecord(params)) return JSON.stringify(params ?? {});
  return Object.entries(params).map(([k, v]) => `${k}=${fmtNumber(v)}`).join(", ");
}

export function trialDuration(trial, now = Date.now()) {
  if (!trial.start) return null;
  return ((trial.end || now) - trial.start) / 1000;
}

// six significant digits, positional where that stays short (0.0001, 123456) and exponential only for
// very small or large numbers (1.5e-7, 2.5e+9)
export function fmtNumber(value) {
  if (value === null || value === undefined) return "–";
  if (typeof value !== "number") return typeof value === "object" ? JSON.stringify(value) : String(value);
  if (Number.isInteger(value) && Math.abs(value) < 1e15) return String(value);
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 1e-6 || abs >= 1e9)) return value.toExponential(4).replace(/\.?0+e/, "e");
  return String(+value.toPrecision(6));
}

// seconds as a person types a duration: in the largest unit that holds it whole (7200 → "2h", 5400 → "90m")
export function durationText(seconds) {
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (seconds >= size && seconds % size === 0) return `${seconds / size}${unit}`;
  }
  return `${seconds}s`;
}

// "1h", "30m", "90" (seconds) → seconds, as NNI's maxExperimentDuration accepts
export function parseDuration(text) {
  const match = String(text).trim().match(/^(\d+(?:\.\d+)?)\s*([smhd]?)$/i);
  if (!match) return null;
  const unit = { "": 1, s: 1, m: 60, h: 3600, d: 86400 }[match[2].toLowerCase()];
  return Number(match[1]) * unit;
}

export function card(title, body, extra = null) {
  return h("section", { className: "card" },
    h("header", { className: "card-head" }, h("h2", {}, title), extra),
    h("div", { className: "card-body" }, body));
}

export function toast(message, kind = "info") {
  const el = h("div", { className: `toast toast-${kind}`, role: "status" }, message);
  document.getElementById("toasts").append(el);
  setTimeout(() => el.remove(), kind === "error" ? 8000 : 4000);
}

// Escape closes the newest dialog or drawer (each registers its close function while open)
const closers = [];
export function onEscape(close) {
  closers.push(close);
  return () => { const i = closers.lastIndexOf(close); if (i >= 0) closers.splice(i, 1); };
}
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && closers.length) {
    e.preventDefault();
    closers[closers.length - 1]();
  }
});

// a modal dialog; returns a function that closes it
export function modal(title, body, actions = []) {
  const close = () => { forget(); overlay.remove(); };
  const forget = onEscape(close);
  const overlay = h("div", { className: "overlay", onclick: (e) => { if (e.target === overlay) close(); } },
    h("div", { className: "dialog", role: "dialog", "aria-label": title },
      h("header", { className: "dialog-head" }, h("h2", {}, title),
        h("button", { className: "icon-btn", title: "Close", onclick: close }, "✕")),
      h("div", { className: "dialog-body" }, body),
      actions.length ? h("footer", { className: "dialog-foot" }, actions) : null));
  document.body.append(overlay);
  return close;
}

export function jsonBlock(value) {
  return h("pre", { className: "json" }, JSON.stringify(value, null, 2));
}

export function debounce(fn, ms) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

// the default metric of a reported value (a number, or the "default" key of a dict)
export function scalar(value) {
  if (value && typeof value === "object") value = value.default;
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

// Redraws of a page's charts: `mark(name)` asks for `jobs[name]` to run again. Jobs run one per task (the
// browser paints and handles input between two of them, and the live table never waits behind a chart),
// the longest-waiting first, and each at most once per its interval: a slow chart cannot starve the others.
export function redrawScheduler(jobs, { minInterval = 1000, intervals = {} } = {}) {
  const last = new Map(); // name → when it last ran
  const dirty = new Set();
  let timer = null;
  let cancelled = false;
  const due = (name) => (last.get(name) ?? -Infinity) + (intervals[name] ?? minInterval);

  function arm() {
    if (timer !== null || cancelled || !dirty.size) return;
    const wait = Math.min(...[...dirty].map(due)) - performance.now();
    timer = setTimeout(pump, Math.max(0, wait));
  }

  function pump() {
    timer = null;
    const now = performance.now();
    const ready = [...dirty].filter((name) => due(name) <= now).sort((a, b) => due(a) - due(b));
    if (ready.length && !cancelled) {
      const name = ready[0];
      dirty.delete(name);
      last.set(name, now);
      // a job's drawing happens in this task (plotly, once loaded, draws synchronously); what it awaits
      // (a query) does not hold the other charts back
      Promise.resolve().then(jobs[name]).catch((error) => console.warn(`redrawing ${name} failed`, error));
    }
    arm();
  }

  return {
    mark(name) { dirty.add(name); arm(); },
    cancel() { cancelled = true; clearTimeout(timer); dirty.clear(); },
  };
}
