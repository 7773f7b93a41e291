"""The parallel coordinates beyond 1,000 lines, which parcoords.js sets into the canvas's pixels itself instead of
stroking them (the page's own module, in a real Chromium, on the web UI's static files)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.webui_brush import static_server

#: 1,500 lines on two axes a and b, all flat: 500 of the highest colour and 500 of the lowest, interleaved, on
#: the top row (a = b = 1); 500 of the middle colour on the bottom row (a = b = 0)
DRAW = """async (module) => {
  const { parcoords } = await import(module);
  document.body.style.margin = '0';
  const el = document.createElement('div');
  el.id = 'pc';
  el.style.cssText = 'position:absolute;left:0;top:0;width:800px;height:400px';
  document.body.append(el);
  const top = (i) => i % 3 !== 2;
  const lines = Array.from({ length: 1500 }, (_, i) => i);
  const side = lines.map((i) => (top(i) ? 1 : 0));
  parcoords(el, {
    customdata: lines.map(String),
    line: { color: lines.map((i) => (top(i) ? (i % 3 === 0 ? 1 : 0) : 0.5)), reversescale: false },
    dimensions: [{ label: 'a', values: side }, { label: 'b', values: [...side] }],
  });
}"""

#: the rows (device pixels = CSS pixels here) of canvas `n` that are painted at the column halfway between the
#: axes, with each row's RGBA
COLUMN = """(n) => {
  const canvas = document.querySelectorAll('#pc canvas')[n];
  const x = Math.round(canvas.width / 2);
  const data = canvas.getContext('2d').getImageData(x, 0, 1, canvas.height).data;
  const rows = {};
  for (let y = 0; y < canvas.height; y++) if (data[4 * y + 3]) rows[y] = Array.from(data.slice(4 * y, 4 * y + 4));
  return rows;
}"""

FADED, KEPT = 0, 1
TOP_ROW, BOTTOM_ROW = 44, 400 - 24  # the chart's margins
HIGHEST = [243, 230, 39]  # Viridis at the top colour group's middle (31.5 / 32) ...
MIDDLE = [34, 148, 140]  # ... and at the group of 0.5 (16.5 / 32)


@pytest.fixture
def parallel(page: Any) -> Iterator[Any]:
    with static_server() as url:
        page.goto(f"{url}/blank")
        page.evaluate(DRAW, f"{url}/js/parcoords.js")
        yield page


def near(rgba: list[int], rgb: list[int]) -> bool:
    return all(abs(a - b) <= 4 for a, b in zip(rgba, rgb, strict=False))


def test_lines_are_pixel_rows_highest_colour_on_top_and_a_brush_keeps_a_range(parallel: Any) -> None:
    kept = parallel.evaluate(COLUMN, KEPT)
    assert sorted(map(int, kept)) == [TOP_ROW, BOTTOM_ROW]
    assert near(kept[str(TOP_ROW)], HIGHEST)  # the lowest colour's lines, drawn among them, are under it
    assert near(kept[str(BOTTOM_ROW)], MIDDLE)
    assert kept[str(TOP_ROW)][3] == 204  # 0.8 opaque, as the stroked lines

    hit = parallel.locator("#pc .y-axis[data-label=a] .axis-hit").bounding_box()
    x = hit["x"] + hit["width"] / 2
    parallel.mouse.move(x, hit["y"] + hit["height"] / 2)
    parallel.mouse.down()
    parallel.mouse.move(x, hit["y"] - 10, steps=4)  # past the axis's top: up to its highest value
    parallel.mouse.up()
    assert (
        parallel.locator("#pc .parcoords-note")
        .inner_text()
        .startswith("1000 of 1500 trials in the brushed ranges")
    )
    assert sorted(map(int, parallel.evaluate(COLUMN, KEPT))) == [TOP_ROW]
    faded = parallel.evaluate(COLUMN, FADED)  # every line, faded, under the kept ones
    assert sorted(map(int, faded)) == [TOP_ROW, BOTTOM_ROW]
    assert (
        parallel.evaluate("() => getComputedStyle(document.querySelectorAll('#pc canvas')[0]).visibility")
        == "visible"
    )

    parallel.mouse.click(x, hit["y"] + hit["height"] * 0.8)  # a click clears the brush: every line again
    assert parallel.locator("#pc .parcoords-note").inner_text() == ""
    assert sorted(map(int, parallel.evaluate(COLUMN, KEPT))) == [TOP_ROW, BOTTOM_ROW]
