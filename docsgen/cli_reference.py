"""The CLI reference page, written by typer's own Markdown generator from the commands themselves."""

from __future__ import annotations

import typer
from typer.cli import get_docs_for_click

INTRO = """\
Generated from the commands when the docs are built: what `trialfleet --help` and each command's `--help` say.
Options with a single dash and underscores (`--url_prefix`, `-e/--experiment_dir`) are nnictl's spellings.
"""


def cli_reference() -> str:
    from trialfleet.cli.main import build_command

    command = build_command()
    docs = get_docs_for_click(
        obj=command, ctx=typer.Context(command), name="trialfleet", title="CLI reference"
    )
    title, _, rest = docs.partition("\n\n")
    return f"{title}\n\n{INTRO}\n{rest}"
