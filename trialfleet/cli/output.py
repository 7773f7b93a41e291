"""Printing: rich tables for people, ``--json`` for scripts, NNI's date format. Rich is imported on first use."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

_console: Console | None = None


def console() -> Console:
    global _console
    if _console is None:
        from rich.console import Console

        # piped output (logs, scripts) is not folded to 80 columns. No markup: what is printed is mostly the
        # user's text (errors with install hints like trialfleet[remote], key paths like machineList[0], a
        # trial's stderr), and styles are given as styles
        _console = Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 200)
    return _console


def print_json(payload: Any) -> None:
    """nnictl's JSON output: indent 4, sorted keys."""
    sys.stdout.write(json.dumps(payload, indent=4, sort_keys=True, default=str) + "\n")


def fmt_time(ms: int | float | None) -> str:
    """NNI's ``%Y/%m/%d %H:%M:%S`` in local time; empty when unknown."""
    if ms is None:
        return ""
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(ms / 1000))


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if cell is None else str(cell) for cell in row))
    console().print(table)


def success(message: str) -> None:
    console().print(message, style="green")


def warning(message: str) -> None:
    from rich.text import Text

    console().print(Text.assemble(("WARNING:", "yellow"), " ", message))


def error_block(message: str) -> None:
    """One block on stderr, no traceback."""
    sys.stderr.write(f"Error: {message.rstrip()}\n")


def yellow_ruled(text: str) -> None:
    """Text between two yellow rulers, as nnictl shows a converted legacy config."""
    rule = "=" * 80
    console().print(rule, style="yellow")
    # never folded: the text is YAML to copy into a file, and a line broken mid-value no longer parses
    console().print(text.rstrip(), soft_wrap=True)
    console().print(rule, style="yellow")


def metric_value(job: dict[str, Any]) -> Any:
    """The default metric of a TrialJobInfo's final result (NNI's double encoding), or None."""
    finals = job.get("finalMetricData") or []
    if not finals:
        return None
    value = json.loads(json.loads(finals[0]["data"]))
    return value.get("default") if isinstance(value, dict) else value


def parameters_of(job: dict[str, Any]) -> Any:
    records = job.get("hyperParameters") or []
    return json.loads(records[0]).get("parameters") if records else None


#: a table cell shows lists and objects this deep; deeper ones are "…" (a stored value may nest 900 levels)
CELL_DEPTH = 8


def short_json(value: Any, _depth: int = 0) -> str:
    """Compact JSON with floats to 6 significant digits, for table cells."""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (dict, list)) and _depth >= CELL_DEPTH:
        return "{…}" if isinstance(value, dict) else "[…]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {short_json(v, _depth + 1)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(short_json(v, _depth + 1) for v in value) + "]"
    return json.dumps(value)
