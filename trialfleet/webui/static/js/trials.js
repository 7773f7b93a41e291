// Trials: the table of all trials, paged, searched, filtered and sorted on the server, so it stays
// fast at 10,000 trials. A row opens the trial's detail (#/trials/<id>).

import { api } from "./api.js";
import {
  badge, debounce, fmtDuration, fmtNumber, fmtShortTime, fmtTime, h, LIVE, modal, STATUS_COLORS, toast,
  TRIAL_STATUSES, trialDuration,
} from "./dom.js";
import { openCompare } from "./compare.js";
import { confirmKill, openCustomize, openTensorboard } from "./trial_actions.js";
import * as detail from "./trial_detail.js";

const PAGE_SIZES = [20, 50, 100, 200];
const HIDDEN_BY_DEFAULT = new Set(["end", "message", "intermediateCount"]);

const view = {
  offset: 0, limit: 20, sort: "sequenceId", order: "desc", statuses: new Set(), q: "",
  selected: new Map(), hidden: loadHidden(), page: null, metricKeys: [],
};
let root = null;
let state = null;
let els = {};
let generation = 0;
let inFlight = false;
let dirty = false;
let reloadTimer = null;
let lastLoad = -Infinity;
const RELOAD_MS = 1000;
// what change-feed deltas said of a trial, numbered: a page query sent before a delta answers with the
// trial as it was, and drawing that would take the row back (a killed trial shown RUNNING again)
let deltaCount = 0;
const deltaSeen = new Map(); // trial id → { n, fresh }

function loadHidden() {
  try { return new Set(JSON.parse(localStorage.getItem("trialfleet.hiddenColumns")) || [...HIDDEN_BY_DEFAULT]); } catch { return new Set(HIDDEN_BY_DEFAULT); }
}

function paramKeys() {
  const keys = new Set(Object.keys(state.exp.searchSpace || {}));
  for (const t of view.page?.trials || []) for (const k of Object.keys(t.params || {})) keys.add(k);
  return [...keys];
}

function columns() {
  const cols = [
    { key: "seq", label: "Trial No.", sort: "sequenceId", render: (t) => String(t.seq), cls: "num" },
    { key: "id", label: "ID", sort: "trialJobId", render: (t) => t.id, cls: "mono" },
    { key: "status", label: "Status", sort: "status", render: (t) => badge(t.status) },
    // a hybrid experiment's trials each ran on one of its platforms
    ...(Array.isArray(state.exp.config?.trainingService)
      ? [{ key: "platform", label: "Platform", sort: "platform", render: (t) => t.platform || "–" }] : []),
    ...paramKeys().map((k) => ({
      key: `param.${k}`, label: k, sort: `param.${k}`, param: true,
      render: (t) => (k in (t.params || {}) ? fmtNumber(t.params[k]) : "–"), cls: "num",
    })),
    { key: "final", label: "Default metric", sort: "final", render: (t) => fmtNumber(t.final), cls: "num strong" },
    ...view.metricKeys.map((k) => ({
      key: `metric.${k}`, label: k, sort: `metric.${k}`,
      render: (t) => fmtNumber(t.finalData && typeof t.finalData === "object" ? t.finalData[k] : null), cls: "num",
    })),
    { key: "latest", label: "Latest", render: (t) => fmtNumber(t.latest), cls: "num", title: "the latest intermediate result" },
    { key: "intermediateCount", label: "Intermediate #", render: (t) => String(t.intermediateCount ?? 0), cls: "num" },
    { key: "duration", label: "Duration", sort: "duration", render: (t) => fmtDuration(trialDuration(t)), cls: "num" },
    { key: "start", label: "Start", sort: "startTime", render: (t) => h("span", { title: fmtTime(t.start) }, fmtShortTime(t.start)) },
    { key: "end", label: "End", sort: "endTime", render: (t) => h("span", { title: fmtTime(t.end) }, fmtShortTime(t.end)) },
    { key: "location", label: "Location", render: (t) => h("span", { className: "mono small ellipsis location", title: t.location || "" }, t.location ? `\u200e${t.location}\u200e` : "–") },
    { key: "message", label: "Message", render: (t) => h("span", { className: "small ellipsis", title: t.message || "" }, t.message || "") },
  ];
  return cols.filter((c) => !view.hidden.has(c.key));
}

async function load() {
  if (inFlight) { dirty = true; return; }
  inFlight = true;
  lastLoad = performance.now();
  const mine = ++generation;
  const sentAfter = deltaCount;
  try {
    const page = await api.trialPage({
      offset: view.offset, limit: view.limit, sort: view.sort, order: view.order,
      status: [...view.statuses].join(","), q: view.q,
    });
    if (mine !== generation || !root) return;
    if (page.total && view.offset >= page.total) {
      view.offset = Math.floor((page.total - 1) / view.limit) * view.limit;
      dirty = true;
      return;
    }
    for (const [id, seen] of deltaSeen) if (seen.n <= sentAfter) deltaSeen.delete(id); // the page has them
    page.trials = page.trials.map((t) => (deltaSeen.has(t.id) ? { ...t, ...deltaSeen.get(t.id).fresh } : t));
    view.page = page;
    view.metricKeys = page.metricKeys;
    els.hints.replaceChildren(...(page.searchHints || []).map((hint) => h("div", {}, hint)));
    els.hints.hidden = !(page.searchHints || []).length;
    renderTable();
  } catch (error) {
    toast(String(error.message || error), "error");
  } finally {
    inFlight = false;
    if (dirty && root) { dirty = false; load(); }
  }
}

function reload() {
  view.offset = 0;
  generation++;
  load();
}

function actionCell(t) {
  return h("td", { className: "actions" },
    LIVE.has(t.status) ? h("button", {
      className: "btn btn-small btn-danger", title: "Kill this trial", disabled: state.exp.readonly,
      dataset: { action: "kill", trial: t.id }, onclick: (e) => { e.stopPropagation(); confirmKill(t); },
    }, "Kill") : null);
}

// a customised trial starts from the parameters of the one selected trial, if exactly one is selected
function customize() {
  const [only] = view.selected.size === 1 ? [...view.selected.values()] : [null];
  openCustomize(state.exp, only ? only.params : null);
}

function headerCell(col) {
  const active = view.sort === col.sort;
  const arrow = active ? (view.order === "asc" ? " ▲" : " ▼") : "";
  return h("th", {
    className: `${col.sort ? "sortable" : ""} ${active ? "sorted" : ""} ${(col.cls || "").includes("num") ? "num" : ""}`,
    onclick: col.sort ? () => {
      // decided at click time: a second click may come before the table is redrawn
      const again = view.sort === col.sort;
      view.order = again && view.order === "asc" ? "desc" : "asc";
      view.sort = col.sort;
      reload();
    } : null,
  }, col.label, arrow);
}

function selectBox(t) {
  return h("input", {
    type: "checkbox", checked: view.selected.has(t.id), title: "Select for compare",
    onclick: (e) => e.stopPropagation(),
    onchange: (e) => { if (e.target.checked) view.selected.set(t.id, t); else view.selected.delete(t.id); renderToolbarState(); },
  });
}

function row(t, cols) {
  return h("tr", {
    className: "clickable", dataset: { trial: t.id, status: t.status },
    onclick: () => { location.hash = `#/trials/${t.id}`; },
  }, h("td", { className: "select" }, selectBox(t)), cols.map((c) => h("td", { className: c.cls || "" }, c.render(t))), actionCell(t));
}

function renderTable() {
  const cols = columns();
  const trials = view.page.trials;
  for (const t of trials) if (view.selected.has(t.id)) view.selected.set(t.id, t);
  const body = trials.map((t) => row(t, cols));
  els.table.replaceChildren(
    h("thead", {}, h("tr", {}, h("th", { className: "select" }), cols.map(headerCell), h("th", { className: "actions" }, ""))),
    h("tbody", {}, body.length ? body : h("tr", {}, h("td", { colSpan: cols.length + 2, className: "empty" }, "No trial matches."))));
  renderPager();
  renderToolbarState();
}

// a change-feed delta redraws the shown rows of the trials it names at once (what the page's query adds,
// the latest intermediate result and the count, is kept until the page is fetched again)
function patchRows(changed) {
  deltaCount += 1;
  for (const t of changed) deltaSeen.set(t.id, { n: deltaCount, fresh: { ...deltaSeen.get(t.id)?.fresh, ...t } });
  if (!view.page) return false;
  const byId = new Map(changed.map((t) => [t.id, t]));
  const cols = columns();
  let patched = false;
  view.page.trials = view.page.trials.map((old) => {
    const fresh = byId.get(old.id);
    if (!fresh) return old;
    const merged = { ...old, ...fresh };
    els.table.querySelector(`tbody tr[data-trial="${CSS.escape(old.id)}"]`)?.replaceWith(row(merged, cols));
    patched = true;
    return merged;
  });
  return patched;
}

function renderPager() {
  const total = view.page.total;
  const pages = Math.max(1, Math.ceil(total / view.limit));
  const current = Math.floor(view.offset / view.limit) + 1;
  const go = (page) => { view.offset = (Math.min(Math.max(page, 1), pages) - 1) * view.limit; generation++; load(); };
  const first = total ? view.offset + 1 : 0;
  els.pager.replaceChildren(
    h("span", { className: "muted", id: "page-range" }, `${first}–${Math.min(view.offset + view.limit, total)} of ${total.toLocaleString()}`),
    h("label", { className: "muted" }, "Rows ",
      h("select", { className: "select", onchange: (e) => { view.limit = +e.target.value; reload(); } },
        PAGE_SIZES.map((n) => h("option", { value: n, selected: n === view.limit }, String(n))))),
    h("button", { className: "btn btn-small", disabled: current <= 1, onclick: () => go(1) }, "«"),
    h("button", { className: "btn btn-small", id: "prev-page", disabled: current <= 1, onclick: () => go(current - 1) }, "‹"),
    h("span", {}, "Page ", h("input", {
      className: "input page-input", id: "page-input", value: String(current),
      onchange: (e) => go(parseInt(e.target.value, 10) || 1),
    }), ` of ${pages.toLocaleString()}`),
    h("button", { className: "btn btn-small", id: "next-page", disabled: current >= pages, onclick: () => go(current + 1) }, "›"),
    h("button", { className: "btn btn-small", disabled: current >= pages, onclick: () => go(pages) }, "»"));
}

function renderToolbarState() {
  els.compare.textContent = `Compare (${view.selected.size})`;
  els.compare.disabled = view.selected.size < 2;
  els.clear.hidden = view.selected.size === 0;
}

function statusFilter() {
  return h("div", { className: "chips", id: "status-filter" }, TRIAL_STATUSES.map((s) => h("button", {
    className: `chip toggle ${view.statuses.has(s) ? "on" : ""}`, style: `--c:${STATUS_COLORS[s]}`, dataset: { status: s },
    onclick: (e) => {
      if (view.statuses.has(s)) view.statuses.delete(s); else view.statuses.add(s);
      e.currentTarget.classList.toggle("on");
      reload();
    },
  }, s.replace(/_/g, " "))));
}

function columnChooser() {
  const all = [...columnsAll()];
  const body = h("div", { className: "column-list" }, all.map((c) => h("label", { className: "check" },
    h("input", {
      type: "checkbox", checked: !view.hidden.has(c.key), dataset: { column: c.key },
      onchange: (e) => {
        if (e.target.checked) view.hidden.delete(c.key); else view.hidden.add(c.key);
        localStorage.setItem("trialfleet.hiddenColumns", JSON.stringify([...view.hidden]));
        renderTable();
      },
    }), c.label)));
  modal("Columns", body);
}

function columnsAll() {
  const hidden = view.hidden;
  view.hidden = new Set();
  const cols = columns();
  view.hidden = hidden;
  return cols;
}

function parseRoute() {
  const [path, search] = location.hash.slice(1).split("?");
  const params = new URLSearchParams(search || "");
  return { trialId: path.split("/")[2] || null, status: params.get("status") };
}

function route() {
  const { trialId } = parseRoute();
  if (trialId) detail.open(trialId, state, () => { location.hash = "#/trials"; });
  else detail.close();
}

function mount(container, appState) {
  root = container;
  state = appState;
  const { status } = parseRoute();
  if (status) view.statuses = new Set([status]);
  const search = h("input", {
    className: "input search", id: "trial-search", type: "search", placeholder: "Search id, Trial No., status, parameters…", value: view.q,
    oninput: debounce((e) => { view.q = e.target.value; reload(); }, 250),
  });
  els = {
    table: h("table", { className: "table", id: "trials-table" }),
    pager: h("div", { className: "pager" }),
    hints: h("div", { className: "search-hints", id: "search-hints", hidden: true }),
    compare: h("button", { className: "btn", id: "compare-btn", onclick: () => openCompare([...view.selected.values()]) }, "Compare"),
    clear: h("button", { className: "btn btn-link", onclick: () => { view.selected.clear(); renderTable(); } }, "Clear selection"),
  };
  root.append(
    h("h1", { className: "page-title" }, "Trials"),
    h("section", { className: "card" },
      h("div", { className: "toolbar" }, search, statusFilter(), h("span", { className: "spacer" }),
        els.clear, els.compare,
        h("button", { className: "btn", id: "tensorboard-btn", title: "TensorBoard on the selected trials' output directories (with none selected: the running TensorBoards)", onclick: () => openTensorboard([...view.selected.values()]) }, "TensorBoard"),
        h("button", { className: "btn", id: "columns-btn", onclick: columnChooser }, "Columns"),
        h("button", { className: "btn btn-primary", id: "custom-trial-btn", disabled: state.exp.readonly, title: "Submit a trial with edited parameters (starting from the selected trial's)", onclick: customize }, "Customized trial")),
      els.hints,
      h("div", { className: "table-wrap" }, els.table),
      els.pager));
  load();
  route();
}

function update(delta, appState) {
  state = appState;
  if (!root) return;
  if (delta.changed || delta.metrics) {
    if (!delta.reset) patchRows(delta.trials);
    reloadSoon(); // new trials, another order, the latest results: the page's query answers those
  }
  detail.update(delta, appState);
}

// at most one page query per RELOAD_MS while trials keep changing, so 10,000 busy trials never queue them
function reloadSoon() {
  if (reloadTimer !== null) return;
  const wait = Math.max(0, lastLoad + RELOAD_MS - performance.now());
  reloadTimer = setTimeout(() => { reloadTimer = null; load(); }, wait);
}

function unmount() {
  detail.close();
  clearTimeout(reloadTimer);
  reloadTimer = null;
  root = null;
}

export default { mount, update, unmount, route };
