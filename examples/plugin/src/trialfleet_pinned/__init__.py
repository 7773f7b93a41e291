"""``platform: pinned``: local trials, each pinned to a CPU set of its own and run at a chosen niceness.

A workstation that tunes while its owner works: every trial gets one of ``cpuSets`` (``taskset -c``) and runs
``nice``; a trial waits while every set is taken. Built on trialfleet's local platform through its public
surface only (``submit``, ``adopt``, ``poll``), as any plugin would be.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from trialfleet.training_services import (
    Deferred,
    ExperimentContext,
    LocalConfig,
    LocalHandle,
    LocalTrainingService,
    PollBatch,
    Submitted,
    TrialSpec,
)

__all__ = ["CPU_SET_VARIABLE", "SLOT_VARIABLE", "PinnedConfig", "PinnedTrainingService"]

#: tell a trial (and a restarted manager) which CPU set it runs on, and which slot of ``cpuSets`` that is
CPU_SET_VARIABLE = "PINNED_CPU_SET"
SLOT_VARIABLE = "PINNED_SLOT"


class PinnedConfig(LocalConfig):
    """LocalConfig plus the CPU sets trials are pinned to and their niceness."""

    platform: Literal["pinned"] = "pinned"  # type: ignore[assignment]
    cpu_sets: list[str] = Field(min_length=1)  # taskset lists, one per concurrent trial: ["0-1", "2-3"]
    niceness: int = Field(default=10, ge=0, le=19)

    not_acted_on: ClassVar[dict[str, str]] = LocalConfig.not_acted_on


def launched_slot(handle: LocalHandle) -> int | None:
    """The slot a launched trial was given, from its trial directory (docs/trial-directory.md)."""
    command = Path(handle["trial_dir"], "command.json")
    try:
        return int(json.loads(command.read_text())["env"][SLOT_VARIABLE])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class PinnedTrainingService(LocalTrainingService):
    """The local platform over a config model of its own; its handles are the local platform's."""

    platform = "pinned"
    config_class = PinnedConfig
    config: PinnedConfig  # the base checks the experiment's block against config_class when it builds the service

    def __init__(self, context: ExperimentContext) -> None:
        super().__init__(context)
        self.taken: dict[str, int] = {}  # trial id → its slot in cpu_sets

    async def submit(self, spec: TrialSpec) -> Submitted[LocalHandle] | Deferred:
        free = [slot for slot in range(len(self.config.cpu_sets)) if slot not in self.taken.values()]
        if not free:
            return Deferred(f"waiting for a free CPU set (all of {', '.join(self.config.cpu_sets)} are taken)")
        cpus = self.config.cpu_sets[free[0]]
        pinned = f"exec nice -n {self.config.niceness} taskset -c {cpus} /bin/bash -c {shlex.quote(spec.command)}"
        env = {**spec.env, CPU_SET_VARIABLE: cpus, SLOT_VARIABLE: str(free[0])}
        result = await super().submit(dataclasses.replace(spec, command=pinned, env=env))
        if isinstance(result, Submitted):
            # an attempt an earlier manager launched already keeps the slot it was launched with
            slot = launched_slot(result.handle)
            self.taken[spec.trial_id] = free[0] if slot is None else slot
        return result

    async def adopt(self, trial_id: str, handle: LocalHandle, cursor: Mapping[str, Any]) -> None:
        await super().adopt(trial_id, handle, cursor)
        slot = launched_slot(handle)
        if slot is not None:
            self.taken[trial_id] = slot

    async def poll(self) -> PollBatch:
        batch = await super().poll()
        for ended in batch.ended:
            self.taken.pop(ended.trial_id, None)
        return batch
