// The single page: hash routes, the live poll and the header.
//
// A long poll asks /changes with the cursor of the previous answer; the server holds it until something
// changed (or a second passed) and answers with the experiment summary and only the trials that changed,
// so a change reaches the page within a few tens of milliseconds and a quiet experiment of 10,000 trials
// costs a few hundred bytes a second. Pages get each answer as a "delta" and refetch only what they show.

import { api } from "./api.js";
import { badge, h, modal } from "./dom.js";
import * as trialCache from "./trialcache.js";
import overview from "./overview.js";
import trials from "./trials.js";
import charts from "./charts.js";
import experiments from "./experiments.js";
import { openLog } from "./log_panel.js";

const PAGES = { overview, trials, charts, experiments };
const WAIT_S = 1; // how long the server may hold a poll: the header's duration still ticks every second
const MIN_GAP_MS = 150; // between two polls while everything changes (10,000 busy trials)
const RETRY_MS = 1000;

export const state = { exp: null, cursor: null, live: true, lastUpdate: 0, failed: false };
let current = null;

function route() {
  const name = (location.hash.match(/^#\/(\w+)/) || [])[1];
  return PAGES[name] ? name : "overview";
}

function show() {
  if (!state.exp) return;
  const name = route();
  if (current?.name === name) {
    current.page.route?.();
    return;
  }
  current?.page.unmount?.();
  const root = document.getElementById("page");
  root.replaceChildren();
  for (const link of document.querySelectorAll("nav a[data-page]")) {
    link.classList.toggle("active", link.dataset.page === name);
  }
  current = { name, page: PAGES[name] };
  current.page.mount(root, state);
}

function renderHeader() {
  const exp = state.exp;
  document.getElementById("exp-title").replaceChildren(
    h("span", { className: "exp-name" }, exp.name || "(unnamed experiment)"),
    h("span", { className: "exp-id mono" }, exp.id),
    badge(exp.status));
  document.title = `${exp.name || exp.id} · trialfleet`;
  const dot = document.getElementById("live-dot");
  dot.className = `live-dot ${state.failed ? "offline" : state.live ? "on" : "paused"}`;
  document.getElementById("live-text").textContent =
    state.failed ? "offline" : state.live ? "live" : "paused";
}

async function poll() {
  const started = performance.now();
  let wait = RETRY_MS;
  if (state.live) {
    try {
      const answer = await api.changes(state.cursor, state.cursor ? WAIT_S : null);
      // trials: those whose summary changed; metrics: how many intermediate results arrived meanwhile
      const delta = { trials: answer.trials || [], reset: answer.reset, metrics: answer.metrics || 0 };
      delta.changed = delta.reset || delta.trials.length > 0;
      state.cursor = answer.cursor;
      state.exp = answer.experiment;
      state.lastUpdate = Date.now();
      state.failed = false;
      trialCache.apply(delta);
      renderHeader();
      if (!current) show();
      else current.page.update?.(delta, state);
      wait = Math.max(0, started + MIN_GAP_MS - performance.now());
    } catch (error) {
      state.failed = true;
      if (state.exp) renderHeader();
      console.warn("poll failed", error);
    }
  }
  setTimeout(poll, wait);
}

// NNI's "experiment summary": the profile, every trial and every intermediate result, as one JSON file
async function downloadSummary(event) {
  event.preventDefault();
  const [profile, trials, metrics] = await Promise.all([
    api.profile(), api.nniTrials(), api.nniMetrics(),
  ]);
  const blob = new Blob([JSON.stringify({ experimentParameters: profile, trialMessage: trials, intermediateResult: metrics }, null, 2)],
    { type: "application/json" });
  const link = h("a", { href: URL.createObjectURL(blob), download: `experiment-${state.exp.id}.json` });
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}

function about(event) {
  event.preventDefault();
  const exp = state.exp;
  const row = (label, value) => h("div", { className: "field" }, h("div", { className: "label" }, label), h("div", { className: "value" }, value));
  modal("About trialfleet", h("div", { className: "fields", id: "about-body" },
    row("trialfleet", h("span", { id: "about-version" }, exp ? exp.version : "–")),
    row("REST API", "NNI's /api/v1/nni and trialfleet's /api/v1/trialfleet"),
    row("Experiment", exp ? `${exp.name || "(unnamed)"} · ${exp.id}` : "–"),
    row("Platform", exp ? exp.platform : "–"),
    row("Browser", navigator.userAgent.match(/(Chrom(e|ium)|Firefox|Safari)\/[\d.]+/)?.[0] || navigator.userAgent)));
}

function start() {
  document.getElementById("download-summary").addEventListener("click", downloadSummary);
  document.getElementById("about").addEventListener("click", about);
  for (const link of document.querySelectorAll("nav a[data-log]")) {
    link.addEventListener("click", (event) => { event.preventDefault(); openLog(link.dataset.log, link.textContent); });
  }
  document.getElementById("live-toggle").addEventListener("click", () => {
    state.live = !state.live;
    renderHeader();
  });
  window.addEventListener("hashchange", show);
  if (!location.hash) history.replaceState(null, "", "#/overview");
  poll();
}

start();
