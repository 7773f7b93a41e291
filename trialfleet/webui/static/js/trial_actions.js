// Commands on trials, through NNI's routes: kill (DELETE /trial-jobs/<id>), a customised trial with
// edited parameters (POST /trial-jobs) and TensorBoard on selected trials (POST /tensorboard).

import { api } from "./api.js";
import { debounce, h, modal, toast } from "./dom.js";

export function confirmKill(t) {
  const kill = async () => {
    close();
    try {
      await api.killTrial(t.id);
      toast(`Trial ${t.id} is being killed`);
    } catch (error) {
      toast(String(error.message || error), "error");
    }
  };
  const close = modal(`Kill trial ${t.id}?`,
    h("p", {}, `Trial #${t.seq} (${t.status}) will be stopped and marked USER_CANCELED.`),
    [h("button", { className: "btn", onclick: () => close() }, "Cancel"),
      h("button", { className: "btn btn-danger", id: "confirm-kill", onclick: kill }, "Kill trial")]);
}

// an input for one parameter: a select for a "choice" of plain values, a text field otherwise
function parameterInput(name, spec, value) {
  const options = spec && spec._type === "choice" && spec._value.every((v) => v === null || typeof v !== "object")
    ? spec._value : null;
  if (options) {
    return h("select", { className: "select", name, dataset: { json: "1" } }, options.map((v) => h("option", {
      value: JSON.stringify(v), selected: JSON.stringify(v) === JSON.stringify(value),
    }, String(v))));
  }
  const text = value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value);
  return h("input", { className: "input", name, value: text });
}

// a field's text as a JSON value when it parses (numbers, lists, true/false), else as a string
function readValue(input) {
  try { return JSON.parse(input.value); } catch { return input.value; }
}

function specHint(spec) {
  if (!spec) return "not in the search space";
  return `${spec._type} ${JSON.stringify(spec._value)}`;
}

// The dialog asks the manager (POST /trial-check) what it would answer while the user types: a parameter
// outside the search space or left empty is named at its field and Submit waits; once the experiment has
// submitted its max trial number, the dialog offers to raise it by one and submit.
export function openCustomize(exp, params) {
  const space = exp.searchSpace || {};
  const names = [...new Set([...Object.keys(space), ...Object.keys(params || {})])];
  const inputs = names.map((name) => parameterInput(name, space[name], params ? params[name] : undefined));
  const problem = h("p", { className: "form-problem", id: "customize-problem", hidden: true });
  const parameters = () => Object.fromEntries(names.map((name, i) => [name, readValue(inputs[i])]));
  const submitButton = h("button", { className: "btn btn-primary", id: "submit-custom", onclick: () => submit() }, "Submit");
  const raiseButton = h("button", { className: "btn", id: "raise-and-submit", hidden: true, onclick: () => submit(true) });
  let limit = null;

  const show = (refused) => {
    inputs.forEach((input) => input.classList.remove("invalid"));
    problem.hidden = !refused;
    problem.textContent = refused ? refused.message : "";
    limit = refused && refused.what === "maxTrialNumber" ? refused.maxTrialNumber : null;
    raiseButton.hidden = limit === null;
    if (limit !== null) raiseButton.textContent = `Raise max trials to ${limit + 1} and submit`;
    submitButton.disabled = Boolean(refused);
    const field = refused && refused.what === "parameters" ? names.findIndex((name) => refused.message.startsWith(`${name}:`)) : -1;
    if (field >= 0) inputs[field].classList.add("invalid");
  };
  let asked = 0;
  const check = async () => {
    const mine = ++asked;
    try {
      const answer = await api.trialCheck(parameters());
      if (mine === asked) show(answer.problem);
      return answer.problem;
    } catch (error) {
      const failed = { what: "request", message: String(error.message || error) };
      if (mine === asked) show(failed);
      return failed;
    }
  };
  // raising: the manager grows maxTrialNumber by this trial alone, so the tuner cannot take the new slot first
  const submit = async (raise = false) => {
    try {
      const refused = await check();
      if (refused && !(raise && refused.what === "maxTrialNumber")) return;
      const answer = await api.customizedTrial(parameters(), raise);
      close();
      toast(`Customized trial submitted${answer && answer.sequenceId !== undefined ? ` as Trial No. ${answer.sequenceId}` : ""}`);
    } catch (error) {
      toast(String(error.message || error), "error");
    }
  };
  const recheck = debounce(check, 150);
  const form = h("form", { className: "form", id: "customize-form", oninput: recheck, onchange: recheck,
    onsubmit: (e) => { e.preventDefault(); submit(); } },
  names.map((name, i) => h("label", { className: "form-row" },
    h("span", {}, h("b", {}, name), h("small", { className: "muted" }, " ", specHint(space[name]))), inputs[i])));
  const close = modal("Customized trial", h("div", {},
    h("p", { className: "muted" }, "A new trial with these parameters is queued; it counts towards the max trial number."),
    form, problem),
  [h("button", { className: "btn", onclick: () => close() }, "Cancel"), raiseButton, submitButton]);
  check();
}

// TensorBoard runs on the manager's machine, on loopback: the link works where the browser runs there too
function tensorboardUrl(task) {
  return `${location.protocol}//${location.hostname}:${task.port}/`;
}

function taskRows(tasks) {
  if (!tasks.length) return h("p", { className: "muted" }, "No TensorBoard is running.");
  return h("table", { className: "table", id: "tensorboard-tasks" },
    h("thead", {}, h("tr", {}, ["Task", "Status", "Trials", ""].map((c) => h("th", {}, c)))),
    h("tbody", {}, tasks.map((t) => h("tr", { dataset: { task: t.id, status: t.status } },
      h("td", { className: "mono" }, t.id), h("td", {}, t.status), h("td", { className: "mono small" }, t.trialJobIdList.join(", ")),
      h("td", {}, t.status === "RUNNING" ? h("a", { href: tensorboardUrl(t), target: "_blank", className: "tensorboard-link" }, "open") : "")))));
}

// start (or reuse) a TensorBoard on the selected trials and list every task, with "Stop all"
export async function openTensorboard(trials) {
  let started = null;
  try {
    if (trials.length) started = await api.tensorboardStart(trials.map((t) => t.id));
  } catch (error) {
    toast(String(error.message || error), "error");
  }
  const list = h("div", {}, taskRows(await api.tensorboardTasks()));
  const stopAll = async () => {
    try {
      list.replaceChildren(taskRows(await api.tensorboardStopAll()));
      toast("Every TensorBoard was stopped");
    } catch (error) {
      toast(String(error.message || error), "error");
    }
  };
  const close = modal("TensorBoard", h("div", {},
    started ? h("p", {}, `TensorBoard ${started.id} serves ${started.trialJobIdList.length} trial(s): `,
      h("a", { href: tensorboardUrl(started), target: "_blank", id: "tensorboard-open" }, tensorboardUrl(started)),
      h("span", { className: "muted small" }, " (it may take a few seconds to answer)")) : null,
    h("p", { className: "muted small" }, "Trials write their TensorBoard logs to NNI_OUTPUT_DIR/tensorboard; without it their whole output directory is read."),
    list),
  [h("button", { className: "btn btn-danger", id: "tensorboard-stop-all", onclick: stopAll }, "Stop all"),
    h("button", { className: "btn", onclick: () => close() }, "Close")]);
}
