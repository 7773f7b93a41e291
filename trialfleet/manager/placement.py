"""Where a hybrid experiment's next trial goes, as pure functions: tests call them directly.

Each platform (a ``trainingService`` block) has a weight (``placementWeight``, 1 when unset) and may cap its
own running trials (the block's ``trialConcurrency``). A trial is offered first to the platform whose share of
the running trials lies furthest below its weight — Sainte-Laguë's divisor, ``(live + 0.5) / weight``, which
keeps the shares proportional to the weights at every count — then to the next, until one launches it; a
platform that defers it (no free GPU, every host busy) is asked again on the next round. Weight 0 makes a
platform a fallback, offered a trial only after every weighted one deferred it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PlatformLoad:
    """What placement knows of one platform at this moment."""

    name: str
    weight: float  # placementWeight; 0: a fallback
    live: int  # its trials submitted and not ended
    limit: int | None = None  # the block's trialConcurrency
    down: str | None = None  # why it cannot take trials now (every host unreachable), else None
    failed: bool = False  # it left the experiment for good: its start or its poll failed

    @property
    def full(self) -> bool:
        return self.limit is not None and self.live >= self.limit

    @property
    def priority(self) -> float:
        return (self.live + 0.5) / self.weight if self.weight > 0 else math.inf


def placement_order(
    loads: Sequence[PlatformLoad], *, pinned: str | None = None, skip: Iterable[str] = ()
) -> list[str]:
    """The platforms to offer the next trial to, best first; ties go to the earlier block.

    Platforms that are down, at their own ``trialConcurrency`` or in ``skip`` (they deferred a trial this
    round) are left out. A trial ``pinned`` to a platform (it may have started there: a manager killed
    mid-submit, a link dropped mid-launch) is offered there only — or nowhere while that platform cannot take
    it — unless that platform failed for good, when it goes anywhere."""
    skipped = set(skip)
    by_name = {load.name: load for load in loads}
    if pinned is not None and pinned in by_name and not by_name[pinned].failed:
        return [pinned] if _takes(by_name[pinned], skipped) else []
    candidates = [
        (load.priority, index, load.name) for index, load in enumerate(loads) if _takes(load, skipped)
    ]
    return [name for _, _, name in sorted(candidates)]


def _takes(load: PlatformLoad, skipped: set[str]) -> bool:
    return not load.failed and not load.down and not load.full and load.name not in skipped


def waiting_reason(reasons: Mapping[str, str]) -> str:
    """One line for a trial no platform took: each platform's own reason, in block order."""
    if len(reasons) == 1:
        return next(iter(reasons.values()))
    return "; ".join(f"{name}: {reason}" for name, reason in reasons.items())


def unplaced_reason(
    loads: Sequence[PlatformLoad], answers: Mapping[str, str], pinned: str | None = None
) -> str:
    """Why a trial waits: what each platform answered this round (``answers``), or why it was not asked."""
    reasons: dict[str, str] = {}
    for load in loads:
        if load.name in answers:
            reasons[load.name] = answers[load.name]
        elif load.failed:
            continue
        elif load.down:
            reasons[load.name] = load.down
        elif load.full:
            reasons[load.name] = f"its trialConcurrency ({load.limit}) is reached"
    if pinned is not None and pinned in reasons and len(loads) > 1:
        return f"waiting for {pinned}, where it may have started already: {reasons[pinned]}"
    return waiting_reason(reasons) if reasons else "no platform of the experiment is running"
