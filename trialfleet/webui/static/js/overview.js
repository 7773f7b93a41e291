// Overview: what the experiment is, how far it got, its best trials, its search space and config.

import { api, updateExperiment } from "./api.js";
import { openLog } from "./log_panel.js";
import {
  badge, card, durationText, fmtDuration, fmtNumber, fmtParams, fmtTime, h, jsonBlock, modal, parseDuration, STATUS_COLORS,
  redrawScheduler, toast, TRIAL_STATUSES, trialDuration,
} from "./dom.js";
import { finalMetricPlot, release } from "./plots.js";
import * as trialCache from "./trialcache.js";

const ENDED = new Set(["DONE", "STOPPED", "ERROR", "VIEWED"]); // no time is left to count down

let root = null;
let slots = {};
let mode = null; // maximize / minimize for the best-trials table, defaults to the tuner's optimize_mode

function field(label, value) {
  return h("div", { className: "field" }, h("div", { className: "label" }, label), h("div", { className: "value" }, value));
}

function editButton(exp, title, onClick) {
  const id = title.toLowerCase().replace(/ /g, "-");
  return h("button", { className: "btn btn-small", id, title, disabled: exp.readonly, onclick: onClick }, "Edit");
}

// the manager log in the panel that follows it (log_panel.js), as from the sidebar
function managerLogLink(text, id = null) {
  return h("a", { href: "logs/manager.log", id, onclick: (e) => { e.preventDefault(); openLog("manager.log", "Manager log"); } }, text);
}

function infoCard(exp) {
  return card("Experiment", h("div", { className: "fields" },
    field("Name", exp.name || "–"),
    field("ID", h("span", { className: "mono", id: "exp-id" }, exp.id)),
    field("Status", badge(exp.status)),
    field("Platform", exp.platform),
    field("Start", fmtTime(exp.startTime)),
    field("End", fmtTime(exp.endTime)),
    field("Log directory", h("span", { className: "mono small" }, exp.logDir)),
    field("Logs", managerLogLink("manager.log", "overview-manager-log"))));
}

function errorCallout(exp) {
  if (exp.status !== "ERROR" && !exp.error) return null;
  return h("div", { className: "callout error", id: "exp-error" },
    h("strong", {}, "The experiment failed. "),
    managerLogLink("Open the manager log"),
    h("pre", {}, exp.error || "(no message)"));
}

// a hybrid experiment goes on without a platform that failed or is unreachable: say which, and why
function platformCallout(exp) {
  const troubled = (exp.platforms || []).filter((p) => p.status !== "UP");
  if (!troubled.length) return null;
  return h("div", { className: "callout error", id: "platform-problems" },
    h("strong", {}, "Some platforms take no trials; the others go on. "),
    managerLogLink("Open the manager log"),
    h("pre", {}, troubled.map((p) => `${p.platform}: ${p.status}: ${p.message || ""}`).join("\n")));
}

function failureCallout(exp) {
  const failure = exp.firstFailure;
  if (!failure) return null;
  const failed = exp.counts.FAILED || 0;
  return h("div", { className: "callout error", id: "first-failure" },
    h("strong", {}, `${failed} trial${failed === 1 ? "" : "s"} failed and none succeeded yet. `),
    `The first, ${failure.trialId} (${failure.message || "failed"}), wrote to stderr:`,
    h("pre", {}, failure.stderrTail || "(nothing)"));
}

function progress(fraction, color) {
  const pct = Math.min(100, Math.max(0, fraction * 100));
  return h("div", { className: "progress" }, h("div", { className: "bar", style: `width:${pct}%;background:${color}` }));
}

function durationCard(exp) {
  const max = exp.maxExperimentDuration;
  return card("Run time", h("div", {},
    h("div", { className: "big-number", id: "run-time", title: "the time a manager ran the experiment (NNI's execDuration): time stopped between a stop and a resume is not counted, as for maxExperimentDuration; All experiments shows start to end" }, fmtDuration(exp.execDuration),
      h("span", { className: "of" }, max ? ` / ${fmtDuration(max)}` : " / unlimited")),
    max ? progress(exp.execDuration / max, "#2563eb") : null,
    h("div", { className: "settings" },
      setting("Max duration", "max-duration", max ? fmtDuration(max) : "unlimited", editButton(exp, "Edit max duration", () => editValue(exp, "maxDuration"))),
      setting("Remaining", "remaining", max && !ENDED.has(exp.status) ? fmtDuration(Math.max(0, max - exp.execDuration)) : "–", null))));
}

function setting(label, id, value, button) {
  return h("div", { className: "setting" }, h("span", { className: "muted" }, label), h("b", { id }, value), button);
}

function trialsCard(exp) {
  const counts = exp.counts;
  const maxTrials = exp.maxTrialNumber;
  const chips = TRIAL_STATUSES.filter((s) => counts[s]).map((s) =>
    h("a", { className: "chip", href: `#/trials?status=${s}`, style: `--c:${STATUS_COLORS[s]}`, dataset: { status: s } },
      h("span", { className: "chip-label" }, s.replace(/_/g, " ")), h("b", { className: "count" }, counts[s])));
  return card("Trials", h("div", {},
    h("div", { className: "big-number", id: "trial-total" }, String(exp.total),
      h("span", { className: "of" }, maxTrials ? ` / ${maxTrials}` : " / unlimited")),
    maxTrials ? progress(exp.total / maxTrials, "#16a34a") : null,
    h("div", { className: "chips", id: "status-counts" }, chips.length ? chips : h("span", { className: "muted" }, "no trial yet")),
    h("div", { className: "settings" },
      setting("Running", "running", String(counts.RUNNING || 0), null),
      setting("Concurrency", "concurrency", String(exp.trialConcurrency), editButton(exp, "Edit concurrency", () => editValue(exp, "concurrency"))),
      setting("Max trials", "max-trials", maxTrials ? String(maxTrials) : "unlimited", editButton(exp, "Edit max trial number", () => editValue(exp, "maxTrials"))))));
}

function searchSpaceTable(space) {
  const rows = Object.entries(space || {});
  if (!rows.length) return h("div", { className: "empty" }, "No search space.");
  return h("table", { className: "table", id: "search-space-table" },
    h("thead", {}, h("tr", {}, ["Parameter", "Type", "Values"].map((c) => h("th", {}, c)))),
    h("tbody", {}, rows.map(([name, spec]) => h("tr", {},
      h("td", { className: "strong" }, name), h("td", {}, h("span", { className: "tag" }, spec._type)),
      h("td", { className: "mono small wrap" }, JSON.stringify(spec._value))))));
}

const EDITS = {
  concurrency: {
    title: "Trial concurrency", field: "trialConcurrency", type: "TRIAL_CONCURRENCY",
    current: (exp) => exp.trialConcurrency, parse: (t) => (/^\d+$/.test(t) && +t > 0 ? +t : null),
    hint: "A positive integer.",
  },
  maxTrials: {
    title: "Max trial number", field: "maxTrialNumber", type: "MAX_TRIAL_NUM",
    current: (exp) => exp.maxTrialNumber ?? "", parse: (t) => (/^\d+$/.test(t) && +t > 0 ? +t : null),
    hint: "A positive integer.",
  },
  maxDuration: {
    title: "Max experiment duration", field: "maxExperimentDuration", type: "MAX_EXEC_DURATION",
    current: (exp) => (exp.maxExperimentDuration ? durationText(exp.maxExperimentDuration) : ""),
    parse: (t) => { const s = parseDuration(t); return s && s > 0 ? `${s}s` : null; },
    hint: "A number with a unit: 90s, 30m, 2h, 1d.",
  },
};

function editValue(exp, which) {
  const edit = EDITS[which];
  const input = h("input", { className: "input", name: which, value: String(edit.current(exp)), autofocus: true });
  const save = async () => {
    const value = edit.parse(input.value.trim());
    if (value === null) return toast(`${edit.title}: ${edit.hint}`, "error");
    try {
      await updateExperiment(edit.field, value, edit.type);
      close();
      toast(`${edit.title} set to ${input.value.trim()}`);
    } catch (error) {
      toast(String(error.message || error), "error");
    }
  };
  input.addEventListener("keydown", (e) => { if (e.key === "Enter") save(); });
  const close = modal(edit.title, h("label", { className: "form-row" }, h("span", {}, edit.hint), input),
    [h("button", { className: "btn", onclick: () => close() }, "Cancel"),
      h("button", { className: "btn btn-primary", id: "save-edit", onclick: save }, "Save")]);
  input.focus();
}

function bestTrialsTable(trials) {
  if (!trials.length) return h("div", { className: "empty" }, "No trial has a final metric yet.");
  return h("table", { className: "table", id: "best-trials" },
    h("thead", {}, h("tr", {}, ["Trial No.", "ID", "Default metric", "Duration", "Parameters"].map((c) => h("th", {}, c)))),
    h("tbody", {}, trials.map((t) => h("tr", { className: "clickable", onclick: () => { location.hash = `#/trials/${t.id}`; } },
      h("td", {}, String(t.seq)), h("td", { className: "mono" }, t.id),
      h("td", { className: "num" }, fmtNumber(t.final)), h("td", {}, fmtDuration(trialDuration(t))),
      h("td", { className: "params", title: JSON.stringify(t.params) }, fmtParams(t.params))))));
}

async function refreshBest() {
  const answer = await api.trialPage({ sort: "final", order: mode === "minimize" ? "asc" : "desc", limit: 10, status: "SUCCEEDED" });
  slots.best.replaceChildren(bestTrialsTable(answer.trials.filter((t) => typeof t.final === "number")));
}

let scheduler = null;
let unsubscribe = null;
let chartDrawn = null; // the data version and mode the chart shows

function drawChart() {
  const key = `${trialCache.version}|${mode}`;
  if (!root || !trialCache.loaded() || chartDrawn === key) return;
  chartDrawn = key;
  finalMetricPlot(slots.chart, trialCache.list(), mode);
}

function refreshChart() {
  scheduler?.mark("chart");
}

function renderCards(exp) {
  slots.cards.replaceChildren(infoCard(exp), durationCard(exp), trialsCard(exp));
  slots.error.replaceChildren(errorCallout(exp) || "", platformCallout(exp) || "", failureCallout(exp) || "");
}

let shownRevision = null;

function renderConfig(exp) {
  shownRevision = exp.revision;
  slots.space.replaceChildren(searchSpaceTable(exp.searchSpace));
  slots.config.replaceChildren(jsonBlock(exp.config));
}

function mount(container, state) {
  root = container;
  const exp = state.exp;
  mode = exp.optimizeMode;
  const toggle = h("select", { className: "select", id: "best-mode", onchange: (e) => { mode = e.target.value; refreshBest(); refreshChart(); } },
    h("option", { value: "maximize", selected: mode === "maximize" }, "Maximize"),
    h("option", { value: "minimize", selected: mode === "minimize" }, "Minimize"));
  slots = {
    cards: h("div", { className: "grid grid-3" }),
    error: h("div", {}),
    best: h("div", { className: "table-wrap" }),
    chart: h("div", { className: "plot", id: "overview-metric-plot" }),
    space: h("div", { id: "search-space" }),
    config: h("div", { id: "config" }),
  };
  root.append(
    h("h1", { className: "page-title" }, "Overview"),
    slots.error, slots.cards,
    h("div", { className: "grid grid-2" },
      card("Top 10 trials", slots.best, toggle),
      card("Default metric", slots.chart)),
    h("div", { className: "grid grid-2" },
      card("Search space", slots.space),
      card("Config", slots.config)));
  renderCards(exp);
  renderConfig(exp);
  refreshBest();
  chartDrawn = null;
  slots.chart.append(h("div", { className: "empty" }, "Loading…"));
  scheduler = redrawScheduler({ chart: drawChart, best: refreshBest }, { minInterval: 1000 });
  unsubscribe = trialCache.subscribe(refreshChart);
  drawFinalsFirst().finally(() => trialCache.all().then(refreshChart));
}

// The chart from the final results alone (columns, a fraction of every trial's summary): at 100,000 trials
// loading every summary first kept the chart empty for seconds. The summaries load after it, and keep it live.
async function drawFinalsFirst() {
  const trials = await trialCache.finals();
  if (root && trials && !trialCache.loaded()) finalMetricPlot(slots.chart, trials, mode);
}

function update(delta, state) {
  if (!root) return;
  renderCards(state.exp);
  if (state.exp.revision !== shownRevision) renderConfig(state.exp);
  if (delta.changed) scheduler.mark("best");
}

function unmount() {
  unsubscribe?.();
  scheduler?.cancel();
  release(slots.chart);
  root = null;
}

export default { mount, update, unmount };
