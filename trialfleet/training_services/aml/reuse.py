"""Reuse mode on Azure ML: the manager's side of ``worker_relay.py`` (the job's entry command in a worker job).

An Azure ML job shares no directory with the manager, so the worker's mailbox (:mod:`..batch.reuse`) is carried over
the workspace's MLflow, which both reach (the protocol is ``worker_relay.py``'s docstring):

* each attempt given to a worker gets an MLflow run of its own, made here (MLflow's ``runs/create``) with the
  attempt's inputs in its tags (:func:`input_tags`) and, once a worker is chosen, ``mlflow.parentRunId`` naming the
  worker job's run, so that Azure ML studio shows the attempts under their worker job; the worker ships the
  attempt's directory into that run as a job of its own ships into its run, and the manager mirrors it the same way;
* :class:`AmlMailbox` keeps each worker's mailbox (attempts given, cancels, stop) as one tag of the worker job's
  run, rewritten whole (``runs/set-tag``): an attempt leaves it once its mirror holds ``result.json``;
* the worker's own end is a tag of its run too (``trialfleet.worker.ended``), read by a restarted manager.
"""

from __future__ import annotations

import asyncio
import json
import logging
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trialfleet.errors import PlatformError
from trialfleet.training_services.aml.client import AmlClient
from trialfleet.training_services.batch.workers import Worker
from trialfleet.training_services.trial_dir import RESULT_RECORD

log = logging.getLogger(__name__)

# the same names as worker_relay.py's (a test holds them equal: the job's script imports nothing of trialfleet)
MAILBOX_TAG = "trialfleet.mailbox"
ENDED_TAG = "trialfleet.worker.ended"
INPUTS_TAG = "trialfleet.inputs"
INPUT_PREFIX = "trialfleet.input."
PARENT_TAG = "mlflow.parentRunId"  # MLflow's MLFLOW_PARENT_RUN_ID (mlflow/utils/mlflow_tags.py)
ATTEMPT_TAG = "trialfleet.attempt"
#: an input piece is one tag value (Azure ML: 1,000 characters); an attempt's run holds at most this many, which
#: with the 30 slots of its window, the file list, the acknowledgement, the parent and the attempt keeps it within
#: Azure ML's 50 tags of a run
PIECE = 1000
MAX_PIECES = 8
MAILBOX_LIMIT = 1000  # the mailbox is one tag value
#: the most trials a worker is given at once: their entries (attempt and run id) and cancels fit one tag value
MAX_WORKER_TRIALS = 8


def input_tags(
    parameters: str, command: str, env: Mapping[str, str], max_duration: float | None
) -> dict[str, str]:
    """The attempt's run's tags that carry its inputs; ValueError when they do not fit ``MAX_PIECES`` tags."""
    text = json.dumps(
        {"parameters": parameters, "command": command, "env": dict(env), "max_duration": max_duration},
        separators=(",", ":"),
    )
    pieces = [text[start : start + PIECE] for start in range(0, len(text), PIECE)]
    if len(pieces) > MAX_PIECES:
        raise ValueError(
            f"its parameters, command and environment take {len(text)} characters, more than an MLflow run "
            f"carries to a worker ({MAX_PIECES * PIECE})"
        )
    return {INPUTS_TAG: str(len(pieces)), **{f"{INPUT_PREFIX}{k}": piece for k, piece in enumerate(pieces)}}


class AmlMailbox:
    """Each worker's mailbox as a tag of its job's run (see the module docstring); ``trials_here``: where the
    attempts' mirrors are, to see which of them ended."""

    def __init__(self, client: AmlClient, trials_here: Path) -> None:
        self.client, self.trials_here = client, trials_here
        self.boxes: dict[str, dict[str, Any]] = {}  # worker name -> its mailbox as last written
        self.lock = asyncio.Lock()

    async def give(self, worker: Worker, trial_dir: str, handle: Mapping[str, Any]) -> None:
        run_id = str(handle["run_id"])
        what = f"name job {worker.job_id}'s run as the parent of run {run_id}"
        await asyncio.to_thread(self.client.set_tag, run_id, PARENT_TAG, worker.job_id, what)
        await self._update(worker, give=(posixpath.basename(trial_dir), run_id))

    async def cancel(self, worker: Worker, trial_dir: str) -> None:
        await self._update(worker, cancel=posixpath.basename(trial_dir))

    async def stop(self, worker: Worker) -> None:
        await self._update(worker, stop=True)

    async def ended(self, worker: Worker) -> bool:
        tags = await asyncio.to_thread(self.client.run_tags, worker.job_id)
        return bool(tags and ENDED_TAG in tags)

    async def _update(
        self,
        worker: Worker,
        *,
        give: tuple[str, str] | None = None,
        cancel: str | None = None,
        stop: bool = False,
    ) -> None:
        """Add an attempt given (attempt, run id), a cancel or the stop to the worker's mailbox and write it whole."""
        async with self.lock:
            box = self.boxes.get(worker.name)
            if box is None:  # an earlier manager's worker: its mailbox may hold attempts not taken yet
                box = await self._read(worker)
            if give is not None:
                box["give"][give[0]] = give[1]
            if cancel is not None and cancel not in box["cancel"]:
                box["cancel"].append(cancel)
            if stop:
                box["stop"] = 1
            self._prune(box)
            value = json.dumps(box, separators=(",", ":"))
            if len(value) > MAILBOX_LIMIT:
                raise PlatformError(f"aml: worker {worker.name}'s mailbox would exceed one MLflow tag value")
            what = f"write the mailbox of worker {worker.name} (job {worker.job_id})"
            await asyncio.to_thread(self.client.set_tag, worker.job_id, MAILBOX_TAG, value, what)
            self.boxes[worker.name] = box

    async def _read(self, worker: Worker) -> dict[str, Any]:
        tags = await asyncio.to_thread(self.client.run_tags, worker.job_id) or {}
        try:
            box = json.loads(tags.get(MAILBOX_TAG, "{}"))
        except ValueError:
            box = {}
        box = box if isinstance(box, dict) else {}
        return {
            "give": dict(box.get("give") or {}),
            "cancel": list(box.get("cancel") or []),
            "stop": box.get("stop", 0),
        }

    def _prune(self, box: dict[str, Any]) -> None:
        """Attempts whose mirror holds their end leave the mailbox (the worker is done with them)."""
        done = {a for a in [*box["give"], *box["cancel"]] if (self.trials_here / a / RESULT_RECORD).exists()}
        box["give"] = {a: r for a, r in box["give"].items() if a not in done}
        box["cancel"] = [a for a in box["cancel"] if a not in done]
