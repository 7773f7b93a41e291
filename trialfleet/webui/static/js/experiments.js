// All experiments of this machine, from the manifest (NNI's /experiments-info).

import { api } from "./api.js";
import { badge, fmtDuration, fmtTime, h, toast } from "./dom.js";

const REFRESH_EVERY = 5; // polls
const ENDED = new Set(["DONE", "STOPPED", "ERROR", "VIEWED"]);

let root = null;
let state = null;
let els = {};
let entries = [];
let leases = {}; // host → experiment → {gpus, waiting, waitingSince}
let ticks = 0;
const filters = { status: "", platform: "", q: "" };

function link(entry) {
  if (entry.id === state.exp.id) return h("a", { href: "#/overview" }, "open");
  const url = Array.isArray(entry.webuiUrl) ? entry.webuiUrl[0] : entry.webuiUrl;
  if (entry.port && url) return h("a", { href: url, target: "_blank" }, "open");
  return h("span", { className: "muted small", title: `trialfleet view ${entry.id}` }, "not running");
}

function matches(entry) {
  if (filters.status && entry.status !== filters.status) return false;
  if (filters.platform && entry.platform !== filters.platform) return false;
  const q = filters.q.toLowerCase();
  return !q || entry.id.toLowerCase().includes(q) || (entry.experimentName || "").toLowerCase().includes(q);
}

// an experiment runs while its manager serves it (a port); an ended one has an end time, never a growing duration
function experimentDuration(entry) {
  if (!entry.startTime) return null;
  if (entry.endTime) return (entry.endTime - entry.startTime) / 1000;
  return entry.port && !ENDED.has(entry.status) ? (Date.now() - entry.startTime) / 1000 : null;
}

// what the experiment holds and waits for on each machine's GPUs (docs/shared-fleet.md)
function gpuCell(entry) {
  const parts = [];
  for (const [host, experiments] of Object.entries(leases)) {
    const held = experiments[entry.id];
    if (!held) continue;
    const gpus = held.gpus.length ? `GPU ${held.gpus.join(",")}` : "no GPU";
    const waits = held.waiting ? `, waits for ${held.waiting} since ${fmtTime(held.waitingSince * 1000)}` : "";
    parts.push(`${host}: ${gpus}${waits}`);
  }
  return h("td", { className: "small", dataset: { gpus: entry.id } }, parts.length ? parts.join("; ") : "–");
}

function renderTable() {
  const shown = entries.filter(matches).sort((a, b) => (b.startTime || 0) - (a.startTime || 0));
  const rows = shown.map((e) => h("tr", { dataset: { experiment: e.id }, className: e.id === state.exp.id ? "current" : "" },
    h("td", {}, e.experimentName || "–"), h("td", { className: "mono" }, e.id), h("td", {}, badge(e.status || "UNKNOWN")),
    h("td", {}, e.platform || "–"), h("td", {}, fmtTime(e.startTime)), h("td", {}, fmtTime(e.endTime)),
    h("td", { className: "num" }, fmtDuration(experimentDuration(e))), gpuCell(e),
    h("td", {}, link(e))));
  els.table.replaceChildren(
    h("thead", {}, h("tr", {}, ["Name", "ID", "Status", "Platform", "Start", "End", "Start to end", "GPUs", ""].map((c) =>
      h("th", c === "Start to end" ? { title: "wall-clock time from start to end (or now), stopped periods included; the Overview's run time counts only the time a manager ran it" } : {}, c)))),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colSpan: 9, className: "empty" }, "No experiment matches."))));
}

function filterSelect(key, label) {
  const values = [...new Set(entries.map((e) => e[key]).filter(Boolean))].sort();
  return h("select", { className: "select", id: `filter-${key}`, onchange: (e) => { filters[key] = e.target.value; renderTable(); } },
    h("option", { value: "" }, `All ${label}`), values.map((v) => h("option", { value: v, selected: v === filters[key] }, v)));
}

async function load() {
  try {
    const [answer, held] = await Promise.all([api.experimentsInfo(), api.gpuLeases()]);
    entries = Array.isArray(answer) ? answer : Object.values(answer);
    leases = held.hosts || {};
  } catch (error) {
    toast(String(error.message || error), "error");
    return;
  }
  if (!root) return;
  if (!els.selects.contains(document.activeElement)) {
    els.selects.replaceChildren(filterSelect("status", "statuses"), filterSelect("platform", "platforms"));
  }
  renderTable();
}

function mount(container, appState) {
  root = container;
  state = appState;
  els = { table: h("table", { className: "table", id: "experiments-table" }), selects: h("span", { className: "btn-group" }) };
  const search = h("input", { className: "input search", type: "search", placeholder: "Search name or id…", value: filters.q,
    oninput: (e) => { filters.q = e.target.value; renderTable(); } });
  root.append(h("h1", { className: "page-title" }, "All experiments"),
    h("section", { className: "card" }, h("div", { className: "toolbar" }, search, els.selects),
      h("div", { className: "table-wrap" }, els.table)));
  load();
}

function update(_delta, appState) {
  state = appState;
  if (root && ++ticks % REFRESH_EVERY === 0) load();
}

function unmount() {
  root = null;
}

export default { mount, update, unmount };
