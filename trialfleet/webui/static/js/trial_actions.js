// Commands on trials, through NNI's routes: kill (DELETE /trial-jobs/<id>) and a customised trial
// with edited parameters (POST /trial-jobs).

import { api } from "./api.js";
import { h, modal, toast } from "./dom.js";

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

export function openCustomize(exp, params) {
  const space = exp.searchSpace || {};
  const names = [...new Set([...Object.keys(space), ...Object.keys(params || {})])];
  const inputs = names.map((name) => parameterInput(name, space[name], params ? params[name] : undefined));
  const form = h("form", { className: "form", id: "customize-form", onsubmit: (e) => { e.preventDefault(); submit(); } },
    names.map((name, i) => h("label", { className: "form-row" },
      h("span", {}, h("b", {}, name), h("small", { className: "muted" }, " ", specHint(space[name]))), inputs[i])));
  const submit = async () => {
    const parameters = Object.fromEntries(names.map((name, i) => [name, readValue(inputs[i])]));
    try {
      const answer = await api.customizedTrial(parameters);
      close();
      toast(`Customized trial submitted${answer && answer.sequenceId !== undefined ? ` as Trial No. ${answer.sequenceId}` : ""}`);
    } catch (error) {
      toast(String(error.message || error), "error");
    }
  };
  const close = modal("Customized trial", h("div", {},
    h("p", { className: "muted" }, "A new trial with these parameters is queued; it counts towards the max trial number."),
    form),
  [h("button", { className: "btn", onclick: () => close() }, "Cancel"),
    h("button", { className: "btn btn-primary", id: "submit-custom", onclick: submit }, "Submit")]);
}
