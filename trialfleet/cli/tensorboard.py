"""``tensorboard start|stop`` (nnictl's): TensorBoard on chosen trials' output directories, run by the manager."""

from __future__ import annotations

import time

import typer

from trialfleet.cli.output import success

app = typer.Typer(help="Start and stop TensorBoard on trials' output directories.", no_args_is_help=True)

IdArgument = typer.Argument(None, help="experiment id (default: the running experiment)")
READY_TIMEOUT = 120.0  # TensorBoard takes seconds to start, more on a busy machine


@app.command("start")
def start(
    experiment_id: str | None = IdArgument,
    trial_id: str | None = typer.Option(
        None, "--trial_id", "--trial-id", "-T", help="trial id(s), comma-separated (default: the only trial)"
    ),
    port: int = typer.Option(6006, "--port", min=1, max=65535, help="TensorBoard's port"),
) -> None:
    """Start TensorBoard on the trials' output directories (NNI_OUTPUT_DIR/tensorboard when a trial wrote one)."""
    from trialfleet.client import resolve_running, rest_client
    from trialfleet.errors import ExperimentStateError, TensorboardError

    (ref,) = resolve_running(experiment_id)
    client = rest_client(ref)
    try:
        if trial_id:
            ids = [t.strip() for t in trial_id.split(",") if t.strip()]
        else:
            ids = [job["trialJobId"] for job in client.trial_jobs()]
            if len(ids) != 1:
                raise ExperimentStateError(
                    f"experiment {ref.id} has {len(ids)} trials: choose them with --trial_id ID[,ID...]"
                )
        task = client.tensorboard_start(ids, port)
    finally:
        client.close()
    url = f"http://127.0.0.1:{task['port']}"
    if not _answers(url, READY_TIMEOUT):
        raise TensorboardError(
            f"TensorBoard did not answer at {url} within {READY_TIMEOUT:.0f} s: see "
            f"{ref.experiment_dir / 'log' / ('tensorboard-' + task['id'] + '.log')}"
        )
    success(f"Start tensorboard success!\nTensorboard urls: {url}")


@app.command("stop")
def stop(experiment_id: str | None = IdArgument) -> None:
    """Stop every TensorBoard of the experiment."""
    from trialfleet.client import resolve_running, rest_client

    (ref,) = resolve_running(experiment_id)
    client = rest_client(ref)
    try:
        stopped = client.tensorboard_stop_all()
    finally:
        client.close()
    success("Stop tensorboard success!" if stopped else "No tensorboard is running.")


def _answers(url: str, timeout: float) -> bool:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=5, trust_env=False)
            return True
        except httpx.HTTPError:
            time.sleep(0.2)
    return False
