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

export function fmtNumber(value) {
  if (value === null || value === undefined) return "–";
  if (typeof value !== "number") return typeof value === "object" ? JSON.stringify(value) : String(value);
  if (Number.isInteger(value)) return String(value);
  const abs = Math.abs(value);
  return abs !== 0 && (abs < 1e-3 || abs >= 1e6) ? value.toExponential(4) : String(+value.toFixed(6));
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

// a modal dialog; returns a function that closes it
export function modal(title, body, actions = []) {
  const close = () => overlay.remove();
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

// Coalesce calls to an expensive redraw: it runs at once when idle, otherwise once more after a pause of
// four times its last duration, so big charts never take more than a fifth of the page's time.
export function adaptiveThrottle(fn) {
  let cost = 0;
  let last = 0;
  let timer = null;
  let running = false;
  const run = async () => {
    timer = null;
    running = true;
    const started = performance.now();
    try { await fn(); } finally {
      running = false;
      last = performance.now();
      cost = last - started;
    }
  };
  return () => {
    if (timer || running) { if (!timer) timer = setTimeout(run, 4 * cost); return; }
    const wait = Math.max(0, last + 4 * cost - performance.now());
    if (wait) timer = setTimeout(run, wait); else run();
  };
}
