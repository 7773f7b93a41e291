"""Brushing the parallel coordinates with 10,000 lines, in headless Chromium: how long a mouse move takes.

Part of ``python -m bench.webui`` (issue 46: under 50 ms per move at 10,000 lines); alone, it serves the web
UI's static files itself and measures in a few seconds::

    python -m bench.webui_brush [--lines 10000] [--moves 40]

The page's own ``parcoords.js`` draws a 10,000-line trace (four parameters and the metric, in the chart's
size on the charts page) and the mouse, driven through Chromium's input pipeline, drags a brush along the
metric's axis: ``moves`` moves down, then back up (the kept set grows and shrinks). Each move is timed from
the ``pointermove`` event to the end of the next frame (a message posted from the frame's animation callback
runs after it is painted), so the canvas's rasterisation counts, not only the handler. Measured, never
asserted.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import statistics
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

STATIC = Path(__file__).resolve().parents[1] / "trialfleet" / "webui" / "static"

#: draws the trace in a fresh element and times every pointer move to its next painted frame
SETUP = """async ([module, lines]) => {
  const { parcoords } = await import(module);
  document.body.style.margin = '0';
  const el = document.createElement('div');
  el.id = 'brush-bench';
  el.style.cssText = 'position:fixed;z-index:100;left:0;top:0;width:1300px;height:420px;background:#fff';
  document.body.append(el);
  let seed = 7;
  const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  const column = (f) => Array.from({ length: lines }, f);
  const lr = column(() => -4 + 3 * random());
  const batch = column(() => Math.floor(random() * 3));
  const layers = column(() => 1 + Math.floor(random() * 8));
  const dropout = column(() => random() * 0.5);
  const metric = lr.map((v, i) => 0.9 - Math.abs(v + 2) / 4 - dropout[i] / 5 + random() / 10);
  const t0 = performance.now();
  parcoords(el, {
    type: 'parcoords', customdata: column((_, i) => `t${i}`), line: { color: metric, reversescale: false },
    dimensions: [
      { label: 'lr (log)', values: lr }, { label: 'batch_size', values: batch, tickvals: [0, 1, 2], ticktext: ['16', '32', '64'] },
      { label: 'layers', values: layers }, { label: 'dropout', values: dropout }, { label: 'metric', values: metric },
    ],
  });
  window.__firstDraw = performance.now() - t0;
  window.__moves = [];
  window.__tasks = [];
  new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__tasks.push(e.duration); })
    .observe({ type: 'longtask', buffered: false });
  document.addEventListener('pointermove', () => {
    const start = performance.now();
    requestAnimationFrame(() => {
      const channel = new MessageChannel();
      channel.port1.onmessage = () => window.__moves.push(performance.now() - start);
      channel.port2.postMessage(0);
    });
  }, true);
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 50)));
}"""


def measure(page: Any, module_url: str, lines: int = 10_000, moves: int = 40) -> dict[str, Any]:
    """Draw ``lines`` lines with the page's parcoords.js (at ``module_url``) and brush the metric's axis:
    the first drawing (ms), each move's time to its painted frame (ms) and the long tasks meanwhile."""
    from trialfleet.testing.webui_scale import wait_js

    page.evaluate(SETUP, [module_url, lines])
    box = page.locator("#brush-bench .y-axis[data-label=metric] .axis-hit").bounding_box()
    x = box["x"] + box["width"] / 2
    top, span = box["y"] + 4, box["height"] - 8
    page.mouse.move(x, top)
    page.mouse.down()
    path = [top + span * (i + 1) / moves for i in range(moves)]
    path += [top + span * (moves - i - 1) / moves + 6 for i in range(moves // 2)]
    for i, y in enumerate(path):
        page.mouse.move(x, y)
        wait_js(page, "n => window.__moves.length >= n", i + 2, timeout=60)  # the first move is the press's
    page.mouse.up()
    figures = page.evaluate("() => ({ first: window.__firstDraw, moves: window.__moves, tasks: window.__tasks })")
    figures["moves"] = figures["moves"][1:]
    figures["note"] = page.locator("#brush-bench .parcoords-note").inner_text()
    page.evaluate("() => document.getElementById('brush-bench').remove()")  # it covered the page's own
    figures["lines"] = lines
    return dict(figures)


def report(figures: dict[str, Any]) -> list[str]:
    moves = figures["moves"] or [0.0]
    tasks = figures["tasks"] or [0.0]
    return [
        f"Brushing the parallel coordinates with {figures['lines']:,} lines (all drawn: 4 parameters and the metric; "
        f"the page's parcoords.js on a 1300x420 chart), {len(moves)} mouse moves dragging a brush along the "
        "metric's axis, each timed from the pointer event to its next painted frame:",
        "",
        "| figure | ms |",
        "|---|---|",
        f"| first drawing of the {figures['lines']:,} lines | {figures['first']:.0f} |",
        f"| move → frame painted, median | {statistics.median(moves):.1f} |",
        f"| move → frame painted, p90 | {sorted(moves)[int(0.9 * (len(moves) - 1))]:.1f} |",
        f"| move → frame painted, max | {max(moves):.1f} |",
        "| longest main-thread task while brushing | "
        + (f"{max(tasks):.0f} ({len(figures['tasks'])} over 50 ms) |" if figures["tasks"] else "none over 50 ms |"),
        "",
        f"The brush's note at the end: \"{figures['note']}\". Issue 46 measured 1.7-2.5 s per move at 10,000 lines "
        "before (546 ms at 2,579).",
    ]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/blank":
            body = b"<!doctype html><html><body></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()


@contextmanager
def static_server() -> Iterator[str]:
    """The web UI's static files on a loopback port (no manager needed to brush)."""
    handler = functools.partial(_Quiet, directory=str(STATIC))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import sync_playwright

    from bench.webui import ARGS, CHROMIUM

    parser = argparse.ArgumentParser(prog="python -m bench.webui_brush", description=__doc__)
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--moves", type=int, default=40)
    args = parser.parse_args(argv)
    with static_server() as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(f"{url}/blank")
        figures = measure(page, f"{url}/js/parcoords.js", args.lines, args.moves)
        browser.close()
    print("\n".join(report(figures)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
