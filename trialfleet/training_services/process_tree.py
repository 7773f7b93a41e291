"""Processes on this machine, seen through /proc: identity checks and killing a trial tree.

The keeper (stdlib-only, no imports from here) carries its own copy of the tree walk; this one serves the
manager when a keeper is gone and the manager must clean up after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

SIGKILL_WAIT = 10.0


@dataclass(frozen=True)
class ProcStat:
    pid: int
    state: str
    ppid: int
    pgid: int
    sid: int
    start_ticks: int


def read_boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def proc_stat(pid: int) -> ProcStat | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes().decode("ascii", "replace")
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # the command name may contain spaces and parentheses
    return ProcStat(pid, fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))


def start_ticks(pid: int) -> int | None:
    stat = proc_stat(pid)
    return stat.start_ticks if stat else None


def is_running(pid: int | None, ticks: int | None) -> bool:
    """Is the process that had ``ticks`` as start time still there (not a zombie, not a reused pid)?"""
    if not pid:
        return False
    stat = proc_stat(pid)
    return stat is not None and stat.state != "Z" and (ticks is None or stat.start_ticks == ticks)


def process_table() -> dict[int, ProcStat]:
    table = {}
    for name in os.listdir("/proc"):
        stat = proc_stat(int(name)) if name.isdigit() else None
        if stat is not None:
            table[stat.pid] = stat
    return table


def trial_tree(pid: int, ticks: int | None) -> set[int]:
    """Live processes of a trial whose keeper is gone: the command, its group, its session, their descendants."""
    table = process_table()
    if pid in table and ticks is not None and table[pid].start_ticks != ticks:
        return set()  # the pid was reused, so its old group and session are gone (Linux keeps those ids busy)
    members = {p for p, s in table.items() if pid in (s.pgid, s.sid)}
    children: dict[int, list[int]] = {}
    for stat in table.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    stack = list(members)
    while stack:
        for kid in children.get(stack.pop(), ()):
            if kid not in members:
                members.add(kid)
                stack.append(kid)
    return {p for p in members if table[p].state != "Z"}


def _send(pids: set[int], *signals: int) -> None:
    for pid in pids:
        for sig in signals:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)


async def kill_trial_tree(pid: int, ticks: int | None, grace: float) -> None:
    """SIGTERM the tree, SIGKILL what is left after ``grace`` seconds; returns once it is gone (or stuck)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    signalled: set[int] = set()
    alive = trial_tree(pid, ticks)
    while alive and loop.time() < deadline:
        _send(alive - signalled, signal.SIGTERM, signal.SIGCONT)
        signalled |= alive
        await asyncio.sleep(0.05)
        alive = trial_tree(pid, ticks)
    deadline = loop.time() + SIGKILL_WAIT
    while alive and loop.time() < deadline:
        _send(alive, signal.SIGKILL)
        await asyncio.sleep(0.05)
        alive = trial_tree(pid, ticks)
