"""Markdown tables of the results, and ``RESULTS.md`` (whose hand-written notes block is kept)."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.stats import Figure

NOTES_START = "<!-- notes: kept when the file is rewritten -->"
NOTES_END = "<!-- /notes -->"


def number(value: float) -> str:
    if value is None or math.isnan(value):
        return "-"
    if math.isinf(value):
        return "∞"
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}"
    if size >= 100:
        return f"{value:.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 1 or size == 0:
        return f"{value:.2f}"
    return f"{value:.3f}"


def cell(figure: Figure | None) -> str:
    if figure is None or not figure:
        return "-"
    if figure.reps == 1 or figure.low == figure.high:
        return number(figure.median)
    return f"{number(figure.median)} ({number(figure.low)}..{number(figure.high)})"


def ratio(nni: Figure | None, ours: Figure | None) -> str:
    if not nni or not ours or ours.median == 0 or math.isnan(nni.median / ours.median):
        return "-"
    return f"{nni.median / ours.median:.3g}x"


@dataclass
class Row:
    label: str
    ours: Figure | None
    nni: Figure | None = None
    floor: str = ""
    target: str = ""


@dataclass
class Section:
    title: str
    nni_label: str = ""  # empty: no NNI column
    ratio_label: str = "ratio NNI / trialfleet"  # the comparison column over trialfleet's
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    load: str = ""
    taken: str = field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M %Z"))

    @property
    def number(self) -> str:
        return self.title.split(".", 1)[0]

    def add(
        self, label: str, ours: Figure | None, nni: Figure | None = None, floor: str = "", target: str = ""
    ) -> None:
        self.rows.append(Row(label, ours, nni, floor, target))

    def markdown(self) -> str:
        head = ["metric", "trialfleet"]
        if self.nni_label:
            head += [self.nni_label, self.ratio_label]
        head += ["bare floor", "target"]
        lines = [f"### {self.title}", ""]
        lines += [f"Taken {self.taken}; load average before: {self.load or '?'}", ""]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for row in self.rows:
            values = [row.label, cell(row.ours)]
            if self.nni_label:
                values += [cell(row.nni), ratio(row.nni, row.ours)]
            values += [row.floor, row.target]
            lines.append("| " + " | ".join(values) + " |")
        lines += [""] + [f"- {note}" for note in self.notes] + ([""] if self.notes else [])
        return "\n".join(lines)


def target(met: bool | None, text: str) -> str:
    if met is None:
        return f"{text}: not measured"
    return f"{text}: **{'met' if met else 'MISSED'}**"


def document(header: list[str], targets: list[str], body: list[str], notes: str) -> str:
    return "\n".join(
        [*header, *targets, "", "\n".join(body), "## Notes", "", NOTES_START, notes.strip(), NOTES_END, ""]
    )


def target_rows(sections: list[Section]) -> list[str]:
    """The rows with a target; a missed one says what the machine allows (its bare floor), where measured."""
    return [
        f"| {section.title.split(':')[0]} | {row.label} | {cell(row.ours)} | {row.target}"
        f"{f' (bare floor, {row.floor})' if row.floor and row.target.endswith('**MISSED**') else ''} |"
        for section in sections
        for row in section.rows
        if row.target
    ]


def kept_parts(path: Path, rerun: set[str]) -> tuple[list[str], list[str]]:
    """The target rows and section texts of an existing results file whose workloads were not re-run."""
    if not path.exists():
        return [], []
    text = path.read_text().split("\n## Notes", 1)[0]
    rows = [line for line in text.splitlines() if re.match(r"\| \d+\. ", line)]
    chunks = re.split(r"(?m)^### ", text)[1:]
    number = re.compile(r"\| (\d+)\.")
    kept_rows = [row for row in rows if number.match(row) and number.match(row).group(1) not in rerun]  # type: ignore[union-attr]
    kept = ["### " + chunk.rstrip() + "\n" for chunk in chunks if chunk.split(".", 1)[0] not in rerun]
    return kept_rows, kept


def kept_notes(path: Path) -> str:
    """The hand-written notes of an existing RESULTS.md (what the profiles showed, what was fixed)."""
    if not path.exists():
        return ""
    found = re.search(re.escape(NOTES_START) + r"(.*?)" + re.escape(NOTES_END), path.read_text(), re.S)
    return found.group(1) if found else ""
