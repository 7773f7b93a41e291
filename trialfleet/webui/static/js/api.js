// The REST calls the UI makes. Paths are relative so the UI works behind a URL prefix.
// A manager listening beyond loopback needs the experiment's access token: the page is opened once at
// /?token=<token>, the server keeps it in an HttpOnly cookie, and every call below sends that cookie.

const NNI = "api/v1/nni";
const OURS = "api/v1/trialfleet";

async function request(method, path, body) {
  const init = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) { // no answer at all (the browser's "Failed to fetch"): the manager stopped or is unreachable
    throw new Error(`${method} ${path}: the manager does not answer (stopped, or not reachable from this browser); ` +
      "start it again with `trialfleet resume <id>`, or read it with `trialfleet view <id>`");
  }
  const text = await response.text();
  if (!response.ok) {
    let message = text;
    try { message = JSON.parse(text).error || JSON.parse(text).detail || text; } catch { /* plain text */ }
    if (response.status === 401) {
      message = "this experiment needs its access token: open this page once as …/?token=<token> " +
        "(printed by `trialfleet create`, kept in the experiment directory's access-token file)";
    }
    throw new Error(`${method} ${path}: ${response.status} ${message}`);
  }
  const type = response.headers.get("Content-Type") || "";
  return type.includes("json") && text ? JSON.parse(text) : text;
}

const query = (params) => {
  const entries = Object.entries(params).filter(([, v]) => v !== null && v !== undefined && v !== "");
  return entries.length ? "?" + new URLSearchParams(entries).toString() : "";
};

export const api = {
  changes: (cursor, wait) => request("GET", `${OURS}/changes${query({ cursor, wait })}`),
  trialPage: (params) => request("GET", `${OURS}/trials${query(params)}`),
  allTrials: () => request("GET", `${OURS}/trials/all`),
  finals: () => request("GET", `${OURS}/finals`),
  trial: (id) => request("GET", `${OURS}/trials/${encodeURIComponent(id)}`),
  trialMetrics: (id, after = 0) => request("GET", `${OURS}/trials/${encodeURIComponent(id)}/metrics${query({ after })}`),
  intermediate: (params) => request("GET", `${OURS}/intermediate${query(params)}`),
  trialCheck: (parameters) => request("POST", `${OURS}/trial-check`, parameters),
  gpuLeases: () => request("GET", `${OURS}/gpu-leases`),

  profile: () => request("GET", `${NNI}/experiment`),
  updateProfile: (profile, updateType) => request("PUT", `${NNI}/experiment${query({ update_type: updateType })}`, profile),
  nniTrials: () => request("GET", `${NNI}/trial-jobs`),
  nniMetrics: () => request("GET", `${NNI}/metric-data`),
  experimentsInfo: () => request("GET", `${NNI}/experiments-info`),
  killTrial: (id) => request("DELETE", `${NNI}/trial-jobs/${encodeURIComponent(id)}`),
  customizedTrial: (parameters, raiseMax = false) =>
    request("POST", `${NNI}/trial-jobs${query({ raiseMaxTrialNumber: raiseMax || null })}`, parameters),
  tensorboardStart: (ids) => request("POST", `${NNI}/tensorboard`, { trials: ids.join(",") }),
  tensorboardTasks: () => request("GET", `${NNI}/tensorboard-tasks`),
  tensorboardStopAll: () => request("DELETE", `${NNI}/tensorboard-tasks`),
  trialFile: (id, name) => request("GET", `${NNI}/trial-file/${encodeURIComponent(id)}/${name}`),
};

// NNI's way to edit a running experiment: fetch the profile, change one field of params, PUT it back
export async function updateExperiment(field, value, updateType) {
  const profile = await api.profile();
  profile.params[field] = value;
  await api.updateProfile(profile, updateType);
}
