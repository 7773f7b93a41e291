// Compare selected trials side by side: their parameters, results, durations and curves.

import { api } from "./api.js";
import { badge, fmtDuration, fmtNumber, h, modal, scalar, trialDuration } from "./dom.js";
import { trialCurvesPlot } from "./plots.js";

function metricKeys(trials) {
  const keys = new Set();
  for (const t of trials) {
    if (t.finalData && typeof t.finalData === "object") for (const k of Object.keys(t.finalData)) if (k !== "default") keys.add(k);
  }
  return [...keys];
}

function row(label, trials, cell) {
  return h("tr", {}, h("th", {}, label), trials.map((t) => h("td", { className: "num" }, cell(t))));
}

export async function openCompare(trials) {
  const params = [...new Set(trials.flatMap((t) => Object.keys(t.params || {})))];
  const plot = h("div", { className: "plot", id: "compare-plot" });
  const table = h("table", { className: "table compare", id: "compare-table" },
    h("thead", {}, h("tr", {}, h("th", {}, "Trial No."), trials.map((t) => h("th", { className: "num" }, `#${t.seq}`)))),
    h("tbody", {},
      row("ID", trials, (t) => h("span", { className: "mono" }, t.id)),
      row("Status", trials, (t) => badge(t.status)),
      row("Default metric", trials, (t) => fmtNumber(t.final)),
      metricKeys(trials).map((k) => row(k, trials, (t) => fmtNumber(t.finalData?.[k]))),
      row("Duration", trials, (t) => fmtDuration(trialDuration(t))),
      params.map((p) => row(p, trials, (t) => fmtNumber(t.params?.[p])))));
  modal(`Compare ${trials.length} trials`, h("div", { className: "compare-body" }, h("div", { className: "table-wrap" }, table), plot));
  const answers = await Promise.all(trials.map((t) => api.trialMetrics(t.id)));
  trialCurvesPlot(plot, trials.map((t, i) => ({
    name: `#${t.seq} ${t.id}`,
    points: answers[i].metrics.filter((m) => m.type === "PERIODICAL").map((m) => [m.sequence, scalar(m.value)]).filter((p) => p[1] !== null),
  })));
}
