"""docs/nni-compatibility.md stays true to the test suite: every "works" and "differs" row names a test, every
test it names exists, and the summary counts are the rows' counts."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "nni-compatibility.md"
TESTS = ROOT / "tests"
STATUSES = ("works", "differs", "not offered", "accepted; platform not available yet")
CITATION = re.compile(r"`([\w/]+\.py)::([^`]+)`")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _sections() -> dict[str, list[dict[str, str]]]:
    """Section title → its table rows (cells keyed by the header)."""
    sections: dict[str, list[dict[str, str]]] = {}
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            rows = sections.setdefault(line[3:].strip(), [])
            header = None
        elif not line.startswith("|"):
            header = None
        elif header is None:
            header = _cells(line)
        elif not set(line) <= set("|- ") and "status" in header:
            rows.append(dict(zip(header, _cells(line), strict=True)))
    return sections


SECTIONS = _sections()
ROWS = [(title, row) for title, rows in SECTIONS.items() for row in rows]


def test_every_row_has_a_known_status() -> None:
    assert len(ROWS) > 300
    assert {row["status"] for _, row in ROWS} <= set(STATUSES)


@pytest.mark.parametrize(
    ("title", "row"),
    [(t, r) for t, r in ROWS if r["status"] in ("works", "differs")],
    ids=[f"{t}: {next(iter(r.values()))}" for t, r in ROWS if r["status"] in ("works", "differs")],
)
def test_works_and_differs_rows_name_a_test(title: str, row: dict[str, str]) -> None:
    assert CITATION.search(row["test"]), (title, row)


def _defined(path: Path, name: str) -> bool:
    """``name`` (``test_x``, ``test_x[param id]``, ``Class::test_x``, ``TestClass``) is a test of ``path``."""
    function, _, param = name.partition("[")
    text = path.read_text()
    if function.startswith("Test") and "::" not in function:  # a whole test class (a contract suite)
        return re.search(rf"^class {re.escape(function)}\b", text, re.MULTILINE) is not None
    if "::" in function:  # a contract suite's method: the class is here, the method in its base class
        cls, function = function.split("::")
        sources = [text, *(p.read_text() for p in (ROOT / "trialfleet" / "testing").glob("*.py"))]
        return f"class {cls}" in text and any(f"def {function}(" in source for source in sources)
    if not re.search(rf"^(async )?def {re.escape(function)}\(", text, re.MULTILINE):
        return False
    return not param or param.rstrip("]") in text  # a parametrize id is written in the file


CITED = sorted({m.groups() for _, row in ROWS for m in CITATION.finditer(row["test"])})
CITED += sorted(
    {m.groups() for m in CITATION.finditer(DOC.read_text())} - set(CITED)
)  # the prose names tests too


@pytest.mark.parametrize(("file", "name"), CITED, ids=[f"{f}::{n}" for f, n in CITED])
def test_named_tests_exist(file: str, name: str) -> None:
    path = TESTS / file
    assert path.is_file(), file
    assert _defined(path, name), f"{file}::{name}"


def test_summary_counts_are_the_rows() -> None:
    summary = DOC.read_text().split("| area |", 1)[1].split("\n\n", 1)[0]
    for line in summary.splitlines()[2:]:
        cells = _cells(line)
        title = re.sub(r"^\[(.+)\]\(.+\)$", r"\1", cells[0]).replace("`", "")
        rows = next(rows for section, rows in SECTIONS.items() if section.replace("`", "") == title)
        counts = Counter(row["status"] for row in rows)
        expected = [int(cell) if cell.isdigit() else 0 for cell in cells[1:]]
        assert [counts[status] for status in STATUSES] == expected, title
