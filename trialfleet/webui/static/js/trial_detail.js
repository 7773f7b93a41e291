// One trial in a side drawer: its facts, parameters, intermediate curve and logs, kept live while
// it runs (new metrics fetched after the last id seen; logs re-read every 2 s).

import { api } from "./api.js";
import { badge, fmtDuration, fmtNumber, fmtTime, h, jsonBlock, LIVE, onEscape, scalar, toast, trialDuration } from "./dom.js";
import { trialCurvesPlot } from "./plots.js";
import { confirmKill, openCustomize } from "./trial_actions.js";

const LOG_FILES = ["stdout", "stderr", "trial.log"];
const LOG_REFRESH_MS = 2000;

let open_ = null; // { id, trial, metrics, lastMetric, tab, logName, els, timer }

function field(label, value) {
  return h("div", { className: "field" }, h("div", { className: "label" }, label), h("div", { className: "value" }, value));
}

function renderHead(state) {
  const t = open_.trial;
  const live = LIVE.has(t.status);
  open_.els.head.replaceChildren(
    h("div", {}, h("h2", {}, `Trial #${t.seq} `, h("span", { className: "mono muted" }, t.id)), badge(t.status)),
    h("div", { className: "btn-group" },
      live ? h("button", { className: "btn btn-danger", id: "detail-kill", disabled: state.exp.readonly, onclick: () => confirmKill(t) }, "Kill") : null,
      h("button", { className: "btn", disabled: state.exp.readonly, onclick: () => openCustomize(state.exp, t.params) }, "Customize"),
      h("button", { className: "icon-btn", title: "Close", id: "detail-close", onclick: open_.onClose }, "✕")));
  open_.els.facts.replaceChildren(h("div", { className: "fields" },
    field("Start", fmtTime(t.start)), field("End", fmtTime(t.end)),
    field("Duration", fmtDuration(trialDuration(t))), field("Default metric", fmtNumber(t.final)),
    field("Location", h("span", { className: "mono small" }, t.location || "–")),
    field("Exit code", t.exitCode ?? "–"), field("Attempt", String(t.attempt ?? 0)),
    field("Source", t.source || "algorithm"),
    t.message ? field("Message", h("span", { className: "small" }, t.message)) : null));
}

// why a trial has no final result, in words (never a bare null): only a SUCCEEDED trial has one (NNI's rule,
// the same on every route and page)
function noFinalResult(status) {
  if (LIVE.has(status)) return "None yet: the trial has not finished.";
  if (status === "SUCCEEDED") return "None: the trial ended without reporting a final result.";
  return `None: only a SUCCEEDED trial has a final result (NNI's rule); this one is ${status.replace(/_/g, " ")}. ` +
    "A FINAL metric it reported stays in its metric data (api/v1/nni/metric-data/<trial id>).";
}

function curves() {
  const periodical = open_.metrics.filter((m) => m.type === "PERIODICAL");
  const points = periodical.map((m) => [m.sequence, scalar(m.value)]).filter((p) => p[1] !== null);
  return [{ name: open_.id, points }];
}

function renderTab() {
  const { els, tab } = open_;
  for (const b of els.tabs.children) b.classList.toggle("active", b.dataset.tab === tab);
  if (tab === "parameters") {
    const copy = h("button", { className: "btn btn-small", onclick: () => navigator.clipboard?.writeText(JSON.stringify(open_.trial.params, null, 2)).then(() => toast("Parameters copied")) }, "Copy as JSON");
    els.body.replaceChildren(copy, jsonBlock(open_.trial.params), h("div", {}, h("h3", {}, "Final result"),
      open_.trial.finalData != null ? jsonBlock(open_.trial.finalData) : h("p", { className: "muted", id: "no-final-result" }, noFinalResult(open_.trial.status))));
  } else if (tab === "intermediate") {
    const plot = h("div", { className: "plot", id: "detail-plot" });
    const rows = open_.metrics.map((m) => h("tr", {}, h("td", {}, m.type), h("td", { className: "num" }, String(m.sequence)),
      h("td", { className: "num" }, fmtNumber(m.value)), h("td", {}, fmtTime(m.timestamp))));
    els.body.replaceChildren(plot, h("div", { className: "table-wrap short" }, h("table", { className: "table", id: "detail-metrics" },
      h("thead", {}, h("tr", {}, ["Type", "Index", "Value", "Time"].map((c) => h("th", {}, c)))), h("tbody", {}, rows))));
    trialCurvesPlot(plot, curves());
  } else {
    renderLogTab();
  }
}

function renderLogTab() {
  const { els } = open_;
  const pre = h("pre", { className: "log", id: "trial-log" }, "loading…");
  els.body.replaceChildren(
    h("div", { className: "btn-group" }, LOG_FILES.map((name) => h("button", {
      className: `btn btn-small ${open_.logName === name ? "active" : ""}`, dataset: { log: name },
      onclick: () => { open_.logName = name; renderLogTab(); },
    }, name)), h("a", { className: "btn btn-small btn-link", href: `api/v1/nni/trial-file/${open_.id}/${open_.logName}`, target: "_blank" }, "open raw")),
    pre);
  refreshLog();
}

async function refreshLog() {
  if (!open_ || open_.tab !== "logs") return;
  const pre = document.getElementById("trial-log");
  if (!pre) return;
  let text;
  try { text = await api.trialFile(open_.id, open_.logName); } catch (error) { text = String(error.message || error); }
  const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
  pre.textContent = text;
  if (atBottom) pre.scrollTop = pre.scrollHeight;
}

async function fetchMetrics() {
  const current = open_;
  const answer = await api.trialMetrics(current.id, current.lastMetric);
  if (open_ !== current || !answer.metrics.length) return false; // closed or another trial opened meanwhile
  const fresh = answer.metrics.filter((m) => m.id > current.lastMetric); // two updates may overlap
  current.metrics.push(...fresh);
  if (fresh.length) current.lastMetric = fresh[fresh.length - 1].id;
  return fresh.length > 0;
}

export async function open(id, state, onClose) {
  if (open_?.id === id) return;
  close();
  const els = { head: h("header", { className: "drawer-head" }), facts: h("div", { className: "drawer-facts" }),
    tabs: h("div", { className: "tabs" }), body: h("div", { className: "drawer-body" }) };
  const tab = (name, label) => h("button", { className: "tab", dataset: { tab: name }, onclick: () => { open_.tab = name; renderTab(); } }, label);
  els.tabs.append(tab("parameters", "Parameters"), tab("intermediate", "Intermediate results"), tab("logs", "Logs"));
  const drawer = h("aside", { className: "drawer", id: "trial-detail", dataset: { trial: id } }, els.head, els.facts, els.tabs, els.body);
  const overlay = h("div", { className: "drawer-overlay", onclick: (e) => { if (e.target === overlay) onClose(); } }, drawer);
  open_ = { id, metrics: [], lastMetric: 0, tab: "parameters", logName: "stdout", els, overlay, onClose, trial: null,
    forget: onEscape(onClose) };
  document.body.append(overlay);
  const mine = open_; // closed (Escape) or replaced while a request was out: this drawer is gone, do nothing
  try {
    const trial = await api.trial(id);
    if (open_ !== mine) return;
    open_.trial = trial;
    if (trial.status === "FAILED") Object.assign(open_, { tab: "logs", logName: "stderr" }); // what explains it
    await fetchMetrics();
    if (open_ !== mine) return;
  } catch (error) {
    els.body.replaceChildren(h("div", { className: "empty error" }, String(error.message || error)));
    return;
  }
  renderHead(state);
  renderTab();
  open_.timer = setInterval(() => { if (open_ && LIVE.has(open_.trial.status)) refreshLog(); }, LOG_REFRESH_MS);
}

export function close() {
  if (!open_) return;
  clearInterval(open_.timer);
  open_.forget();
  open_.overlay.remove();
  open_ = null;
}

export async function update(delta, state) {
  if (!open_ || !open_.trial) return;
  const changed = delta.reset || delta.trials.some((t) => t.id === open_.id);
  if (!changed) {
    if (delta.metrics && LIVE.has(open_.trial.status) && await fetchMetrics() && open_?.tab === "intermediate") renderTab();
    return;
  }
  const id = open_.id;
  const [trial, newMetrics] = await Promise.all([api.trial(id), fetchMetrics()]);
  if (!open_ || open_.id !== id) return;
  const ended = LIVE.has(open_.trial.status) && !LIVE.has(trial.status);
  open_.trial = trial;
  renderHead(state);
  if (ended && trial.status === "FAILED" && open_.tab === "parameters") {
    Object.assign(open_, { tab: "logs", logName: "stderr" }); // it failed while shown: what explains it
    renderTab();
    return;
  }
  if (open_.tab === "intermediate" && newMetrics) renderTab();
  if (open_.tab === "logs" && ended) refreshLog();
}
