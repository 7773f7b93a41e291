"""``update concurrency|duration|trialnum|searchspace``: NNI's profile updates of a running experiment."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer

from trialfleet.cli.output import success

app = typer.Typer(help="Change a running experiment's limits or search space.", no_args_is_help=True)

IdArgument = typer.Argument(None, help="experiment id (default: the running experiment)")


def _update(experiment_id: str | None, update_type: str, key: str, value: Any) -> None:
    from trialfleet.client import open_experiment, resolve_experiment

    client = open_experiment(resolve_experiment(experiment_id))
    try:
        client.update_profile(update_type, key, value)
    finally:
        client.close()
    success(f"Update {key} success!")


@app.command("concurrency")
def concurrency(
    experiment_id: str | None = IdArgument,
    value: int = typer.Option(..., "--value", "-v", help="trials running at once"),
) -> None:
    """Set trialConcurrency."""
    _update(experiment_id, "TRIAL_CONCURRENCY", "trialConcurrency", value)


@app.command("duration")
def duration(
    experiment_id: str | None = IdArgument,
    value: str = typer.Option(..., "--value", "-v", help="like 30s, 10m, 2h or 1d"),
) -> None:
    """Set maxExperimentDuration."""
    if not re.fullmatch(r"\d+[smhd]?", value):
        raise typer.BadParameter(
            "expected whole digits and a unit s, m, h or d, like 10m", param_hint="--value"
        )
    from trialfleet.config import parse_time

    _update(experiment_id, "MAX_EXEC_DURATION", "maxExperimentDuration", parse_time(value))


@app.command("trialnum")
def trial_number(
    experiment_id: str | None = IdArgument,
    value: int = typer.Option(..., "--value", "-v", help="the trial budget"),
) -> None:
    """Set maxTrialNumber."""
    _update(experiment_id, "MAX_TRIAL_NUM", "maxTrialNumber", value)


@app.command("searchspace")
def search_space(
    experiment_id: str | None = IdArgument,
    filename: Path = typer.Option(..., "--filename", "-f", help="the new search space (JSON or YAML)"),
) -> None:
    """Replace the search space; the tuner proposes from it from now on."""
    from trialfleet.config.files import read_search_space
    from trialfleet.errors import ConfigError

    try:
        space = read_search_space(filename)
    except ValueError as exc:
        raise ConfigError(str(exc), file=filename) from exc
    _update(experiment_id, "SEARCH_SPACE", "searchSpace", space)
