"""``platforms``: the platforms this installation can run (built-in and plugins), with their versions."""

from __future__ import annotations

import typer

from trialfleet.cli.output import print_json, print_table


def platforms(as_json: bool = typer.Option(False, "--json", help="as JSON")) -> None:
    """List the training platforms: built-ins and plugins (entry-point group trialfleet.training_services)."""
    from trialfleet.training_services.registry import platforms as known

    described = [platform.describe() for platform in known().values()]
    if as_json:
        print_json(described)
        return
    rows = [
        (
            d["name"],
            d["status"] + (f": {d['problem']}" if d["problem"] else ""),
            d["source"],
            d["service"] or "",
        )
        for d in described
    ]
    print_table(None, ["platform", "status", "from", "service"], rows)
