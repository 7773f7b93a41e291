"""The job-log channel without a cluster: entry.py's framed lines, replayed into the manager's mirror.

Any byte a trial writes survives the trip (log lines are ASCII JSON); the log may be cut anywhere and read
again from its beginning any number of times, and the mirror ends up byte for byte the same; nothing outside
the trial directory, nor the manager's own inputs, can be written through it.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from trialfleet.training_services.ray import entry
from trialfleet.training_services.ray.entry import CHUNK, MARK, frame, unframe
from trialfleet.training_services.ray.log_channel import LogMirror

NASTY = bytes(range(256)) * 3 + "ünï ✓ \n".encode() + b"\xff\xfe broken \xe2\x82" + b"\r\n" * 3


def log_of(streams: dict[str, bytes], records: dict[str, bytes]) -> str:
    lines = ["2026-11-23 INFO job_manager.py:581 -- Runtime env is setting up.\n"]
    offsets = dict.fromkeys(streams, 0)
    while any(offsets[name] < len(data) for name, data in streams.items()):
        for name, data in streams.items():
            chunk = data[offsets[name] : offsets[name] + CHUNK // 3]
            if chunk:
                lines.append(frame(name, chunk, offsets[name]))
                offsets[name] += len(chunk)
    lines += [frame(name, data) for name, data in records.items()]
    return "".join(lines)


def test_frames_are_ascii_and_round_trip_any_bytes() -> None:
    line = frame("trial.stdout", NASTY, 12)
    assert line.isascii() and line.startswith(MARK) and line.endswith("\n") and line.count("\n") == 1
    assert unframe(line.rstrip("\n")) == ("trial.stdout", NASTY, 12)
    assert unframe(frame("result.json", b"{}").rstrip("\n")) == ("result.json", b"{}", None)
    assert unframe("Running entrypoint for job x: python3 entry.py '@trialfleet/1 {}'") is None


@pytest.mark.slow
def test_a_log_cut_anywhere_and_replayed_gives_the_same_mirror(tmp_path: Path) -> None:
    streams = {".nni/metrics": NASTY * 40, "trial.stdout": NASTY * 7, "trial.stderr": b""}
    records = {"keeper.json": b'{"pid": 1}', "result.json": b'{"exit_code": 0}', "sub/out.bin": NASTY}
    text = log_of(streams, records)
    rng = random.Random(7)
    followed = LogMirror(tmp_path / "followed")
    position = 0
    while position < len(text):  # a follower gets chunks cut at random places, then breaks off and restarts
        step = rng.randint(1, 5000)
        followed.feed(text[position : position + step])
        position += step
        if rng.random() < 0.1:
            followed.restart()
            position = 0  # a new follower reads the log from its beginning
    followed.feed("")
    replayed = LogMirror(tmp_path / "replayed")
    replayed.replay(text + "an unfinished li")
    replayed.replay(text)  # read twice: nothing changes
    for mirror in (tmp_path / "followed", tmp_path / "replayed"):
        for name, data in {**streams, **records}.items():
            if data or name in records:
                assert (mirror / name).read_bytes() == data, (mirror.name, name)


def test_a_partial_chunk_is_applied_once_and_extended_later(tmp_path: Path) -> None:
    mirror = LogMirror(tmp_path)
    mirror.apply(frame("trial.stdout", b"hello ", 0).rstrip("\n"))
    mirror.apply(frame("trial.stdout", b"hello wor", 0).rstrip("\n"))  # overlaps what is there
    mirror.apply(frame("trial.stdout", b"world\n", 6).rstrip("\n"))
    mirror.apply(frame("trial.stdout", b"gap", 100).rstrip("\n"))  # past the end: waits for a replay
    assert (tmp_path / "trial.stdout").read_bytes() == b"hello world\n"


def test_names_outside_the_trial_directory_or_of_its_inputs_are_refused(tmp_path: Path) -> None:
    trial_dir = tmp_path / "trials" / "t1"
    mirror = LogMirror(trial_dir)
    (trial_dir).mkdir(parents=True)
    (trial_dir / "parameter.cfg").write_text("{}")
    for name in ("../escaped", "/etc/evil", "a/../../escaped", "parameter.cfg", "command.json", ""):
        mirror.apply(frame(name, b"pwned").rstrip("\n"))
        mirror.apply(frame(name, b"pwned", 0).rstrip("\n"))
    mirror.apply(MARK + '{"file": "x", "text": 3}')  # malformed: logged, skipped
    mirror.apply(MARK + "not json")
    assert (trial_dir / "parameter.cfg").read_text() == "{}"
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "trials",
        "trials/t1",
        "trials/t1/parameter.cfg",
    ]


STREAM_ALL = """
import sys
sys.path.insert(0, sys.argv[1])
import entry
streamer = entry.Streamer(sys.argv[2])
streamer.pump()
streamer.record("keeper.json")
streamer.outputs()
streamer.record("result.json")
"""


def test_fifos_the_trial_made_are_not_waited_on(tmp_path: Path) -> None:
    """A trial that replaces its streams or records by FIFOs must not hold entry.py (and its job) for ever."""
    trial_dir = tmp_path / "trial"
    (trial_dir / ".nni").mkdir(parents=True)
    for name in (".nni/metrics", "trial.stdout", "keeper.json", "out.fifo"):
        os.mkfifo(trial_dir / name)
    (trial_dir / "trial.stderr").write_bytes(b"err\n")
    (trial_dir / "result.json").write_text('{"exit_code": 0}')
    done = subprocess.run(
        [sys.executable, "-I", "-c", STREAM_ALL, str(Path(entry.__file__).parent), str(trial_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    mirror = LogMirror(tmp_path / "mirror")
    mirror.replay(done.stdout)
    assert sorted(p.name for p in mirror.trial_dir.iterdir()) == ["result.json", "trial.stderr"]
    assert (mirror.trial_dir / "trial.stderr").read_bytes() == b"err\n"


def test_links_to_the_private_command_file_are_not_shipped(tmp_path: Path) -> None:
    """Issue 44, item 5 on Ray: a symbolic or hard link the trial makes to its command.json (the environment the
    job adds) is not an output the log channel carries to the manager's mirror."""
    (tmp_path / "command.json").write_text('{"env": {"SECRET": "x"}}')
    (tmp_path / "model.txt").write_text("weights\n")
    (tmp_path / "soft.txt").symlink_to("command.json")
    os.link(tmp_path / "command.json", tmp_path / "hard.txt")
    assert entry.output_files(str(tmp_path)) == [("model.txt", 8)]
