"""What the benchmark reads about processes and the machine from /proc (Linux only)."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name: item 0 is the state, item n is field n + 3."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].decode().split()


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int | None) -> bool:
    fields = _stat_fields(pid) if pid else None
    return fields is not None and fields[0] != "Z"


def rss_and_cpu(pid: int) -> tuple[int, float] | None:
    """Resident bytes and the process's own CPU seconds (not its children's)."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return int(fields[21]) * PAGE, (int(fields[11]) + int(fields[12])) / CLK_TCK


def find_process(*needles: str) -> int | None:
    """The first process (not this one) whose command line contains every needle."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            line = cmdline(int(entry.name))
            if all(needle in line for needle in needles):
                return int(entry.name)
    return None


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        fields = _stat_fields(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def system_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@dataclass
class Sample:
    t: float
    rss: int
    cpu: float


@dataclass
class ProcessSampler:
    """Samples the summed RSS and CPU time of some processes (a manager and its helpers) in a thread,
    and the machine's CPU use over the same span."""

    pids: list[int]
    interval: float = 0.5
    samples: list[Sample] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._cpu0 = system_cpu()
        self._cpu1 = self._cpu0

    def __enter__(self) -> ProcessSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._cpu1 = system_cpu()

    def _run(self) -> None:
        while True:
            self.take()
            if self._stop.wait(self.interval):
                return

    def take(self) -> None:
        found = [stats for stats in map(rss_and_cpu, self.pids) if stats is not None]
        if found:
            self.samples.append(Sample(time.time(), sum(r for r, _ in found), sum(c for _, c in found)))

    @property
    def rss_max_mib(self) -> float:
        return max((s.rss for s in self.samples), default=0) / 2**20

    @property
    def rss_last_mib(self) -> float:
        return self.samples[-1].rss / 2**20 if self.samples else float("nan")

    @property
    def cpu_seconds(self) -> float:
        """The process's CPU time since it started, at the last sample."""
        return self.samples[-1].cpu if self.samples else float("nan")

    @property
    def machine_busy_pct(self) -> float:
        busy = self._cpu1[0] - self._cpu0[0]
        total = self._cpu1[1] - self._cpu0[1]
        return 100.0 * busy / total if total else float("nan")
