"""``webui url``: where a running experiment's web UI is (nnictl's ``Web UI url: ...`` line)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Show where an experiment's web UI is.", no_args_is_help=True)


@app.command("url")
def url(
    experiment_id: str | None = typer.Argument(None, help="experiment id (default: the running experiment)"),
) -> None:
    """The running experiment's web UI URL, with its url prefix."""
    from trialfleet.client import resolve_experiment
    from trialfleet.errors import ExperimentStateError

    ref = resolve_experiment(experiment_id)
    if not ref.running:
        raise ExperimentStateError(
            f"experiment {ref.id} is not running (status {ref.status}); `trialfleet view {ref.id}` serves it"
        )
    typer.echo(f"Web UI url: {ref.url}")
