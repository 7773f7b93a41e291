// The experiment's logs (the manager's, and NNI's "dispatcher" log, which is the same file) in a drawer that
// follows the file as trial logs do: the last 256 KiB first, then every second only the bytes appended since
// (an HTTP Range request from the size last seen), kept scrolled to the end while the reader is there.

import { h, onEscape } from "./dom.js";

const TAIL_BYTES = 256 * 1024;
const FOLLOW_MS = 1000;
let open_ = null; // { name, overlay, pre, size, decoder, timer, forget }

// the file's size from a Content-Range header ("bytes 10-99/100" or "bytes */100"), or null
function sizeOf(response) {
  const match = (response.headers.get("Content-Range") || "").match(/\/(\d+)$/);
  return match ? Number(match[1]) : null;
}

async function follow() {
  const mine = open_;
  if (!mine) return;
  const range = mine.size === null ? `bytes=-${TAIL_BYTES}` : `bytes=${mine.size}-`;
  try {
    const response = await fetch(`logs/${mine.name}`, { headers: { Range: range }, credentials: "same-origin" });
    if (open_ !== mine) return;
    if (response.status === 416) { // nothing after the size last seen; a smaller file was started anew
      const size = sizeOf(response);
      if (size !== null && mine.size !== null && size < mine.size) {
        Object.assign(mine, { size: null, decoder: new TextDecoder() });
        mine.pre.textContent = "";
      } else if (mine.size === null) {
        mine.size = size ?? 0;
        mine.pre.textContent = "";
      }
    } else if (!response.ok) {
      mine.pre.textContent = `${mine.name}: ${response.status} ${await response.text()}`;
    } else {
      const bytes = new Uint8Array(await response.arrayBuffer());
      if (open_ !== mine) return;
      const first = mine.size === null;
      mine.size = sizeOf(response) ?? bytes.length;
      append(mine, mine.decoder.decode(bytes, { stream: true }), first && mine.size > bytes.length);
    }
  } catch (error) {
    if (open_ === mine) mine.status.textContent = `not following: ${error.message || error}`;
  }
  if (open_ === mine) mine.timer = setTimeout(follow, FOLLOW_MS);
}

function append(mine, text, cutAtStart) {
  const pre = mine.pre;
  const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
  if (cutAtStart) text = `… (the earlier part: open raw)\n${text.slice(text.indexOf("\n") + 1)}`;
  if (pre.dataset.empty) { pre.textContent = ""; delete pre.dataset.empty; }
  pre.append(text);
  mine.status.textContent = `following · ${mine.size.toLocaleString()} bytes`;
  if (atBottom) pre.scrollTop = pre.scrollHeight;
}

export function closeLog() {
  if (!open_) return;
  clearTimeout(open_.timer);
  open_.forget();
  open_.overlay.remove();
  open_ = null;
}

export function openLog(name, title) {
  closeLog();
  const pre = h("pre", { className: "log experiment-log", id: "experiment-log", dataset: { empty: "1" } }, "loading…");
  const status = h("span", { className: "muted small", id: "experiment-log-status" });
  const drawer = h("aside", { className: "drawer", id: "log-panel", dataset: { log: name } },
    h("header", { className: "drawer-head" }, h("div", {}, h("h2", {}, title), status),
      h("div", { className: "btn-group" },
        h("a", { className: "btn btn-small btn-link", href: `logs/${name}`, target: "_blank" }, "open raw"),
        h("button", { className: "icon-btn", title: "Close", onclick: closeLog }, "✕"))),
    h("div", { className: "drawer-body" }, pre));
  const overlay = h("div", { className: "drawer-overlay", onclick: (e) => { if (e.target === overlay) closeLog(); } }, drawer);
  open_ = { name, overlay, pre, status, size: null, decoder: new TextDecoder(), timer: null, forget: onEscape(closeLog) };
  document.body.append(overlay);
  follow();
}
