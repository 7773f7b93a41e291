"""The lifecycle contract every training service passes (see ``trialfleet/training_services/base.py``).

Subclass :class:`TrainingServiceContract` and provide three fixtures: ``service_factory`` (an
``ExperimentContext`` → a service not yet started), ``experiment_context`` (see :func:`~.harness.make_context`)
and ``hard_kill`` (SIGKILL a trial's keeper and whole tree from its handle, as a crashed worker would). Override
``control`` when trials do not see this machine's files and processes, ``python_command`` when workers start
python otherwise, and :meth:`TrainingServiceContract.trial_code_dir` when trials run in a copy of the code.

Part of the contract beyond base.py: ``read_trial_file`` raises ``ValueError`` for a name outside the trial
directory and ``FileNotFoundError`` for a missing file.
"""

from __future__ import annotations

import json
import os
import shlex
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from trialfleet.status import FailureKind, TrialStatus
from trialfleet.testing.harness import (
    HOSTILE,
    TRIAL_PRELUDE,
    LocalTrialHost,
    Services,
    TrialHost,
    default_python_command,
    poll_until,
)
from trialfleet.training_services.base import ExperimentContext, TrainingService
from trialfleet.training_services.spec import Submitted, TrialSpec


class TrainingServiceContract:
    """The reusable lifecycle suite. Subclasses provide ``service_factory`` and ``hard_kill``."""

    @pytest.fixture
    def service_factory(self) -> Callable[[ExperimentContext], TrainingService]:
        raise NotImplementedError("a platform's contract test must provide the service_factory fixture")

    @pytest.fixture
    def hard_kill(self) -> Callable[[Mapping[str, Any]], Awaitable[None]]:
        raise NotImplementedError("a platform's contract test must provide the hard_kill fixture")

    @pytest.fixture
    def experiment_context(self, tmp_path: Path) -> ExperimentContext:
        raise NotImplementedError(
            "a platform's contract test must provide the experiment_context fixture (see make_context)"
        )

    @pytest.fixture
    def python_command(self) -> str:
        """How a trial command starts python on the workers."""
        return default_python_command()

    @pytest.fixture
    def code_dir(self, tmp_path: Path) -> Path:
        path = tmp_path / "code"
        path.mkdir()
        return path

    @pytest.fixture
    def control(self, tmp_path: Path) -> TrialHost:
        """The trials' control directory and process table (override for workers elsewhere)."""
        path = tmp_path / "control"
        path.mkdir()
        return LocalTrialHost(path)

    @pytest.fixture
    async def services(
        self,
        service_factory: Callable[[ExperimentContext], TrainingService],
        experiment_context: ExperimentContext,
    ) -> AsyncIterator[Services]:
        pool = Services(service_factory, experiment_context)
        yield pool
        await pool.close_all()

    # ---- helpers ---------------------------------------------------------------------------------

    @staticmethod
    def spec(trial_id: str, command: str, code_dir: Path, parameters: Any = None, **kw: Any) -> TrialSpec:
        record = {"parameter_id": 7, "parameter_source": "algorithm", "parameters": parameters or {"x": 1}}
        record["parameter_index"] = 0
        return TrialSpec(trial_id, kw.pop("sequence_id", 0), command, code_dir, json.dumps(record), **kw)

    @staticmethod
    def script(code_dir: Path, name: str, body: str) -> None:
        (code_dir / name).write_text(TRIAL_PRELUDE + textwrap.dedent(body), encoding="utf-8")

    @staticmethod
    async def submit(service: TrainingService, spec: TrialSpec) -> Submitted:
        submitted = await service.submit(spec)
        assert isinstance(submitted, Submitted), submitted
        return submitted

    def run_command(self, python_command: str, script: str, control: TrialHost) -> str:
        return f"{python_command} {script} {shlex.quote(control.seen_by_trials)}"

    def trial_code_dir(self, handle: Mapping[str, Any], code_dir: Path) -> str:
        """Where a trial of ``code_dir`` runs (its cwd and ``NNI_CODE_DIR``): the directory itself by default;
        platforms that ship a copy to their workers say where it is."""
        return str(code_dir)

    # ---- the cases -------------------------------------------------------------------------------

    async def test_trial_runs_then_succeeds_with_its_final_metric(
        self, services, python_command, code_dir, control
    ) -> None:
        self.script(code_dir, "ok.py", 'touch("running"); wait_for("release"); report("FINAL", 0, 0.5)\n')
        service = await services.start()
        submitted = await self.submit(
            service, self.spec("ok", self.run_command(python_command, "ok.py", control), code_dir)
        )
        await control.wait_for("running")
        seen = await poll_until(service, lambda s: submitted.started or "ok" in s.started)
        assert "ok" not in seen.ended
        control.touch("release")
        seen = await poll_until(service, lambda s: "ok" in s.ended, seen)
        ended = seen.ended["ok"]
        assert (ended.status, ended.exit_code, ended.failure_kind) == (TrialStatus.SUCCEEDED, 0, None)
        assert [(m.type, m.parameter_id, json.loads(m.data)) for m in seen.metrics] == [("FINAL", 7, 0.5)]
        assert seen.problems == []
        assert service.live == {}

    async def test_failing_command_is_failed_with_exit_code(self, services, code_dir) -> None:
        service = await services.start()
        await self.submit(service, self.spec("bad", "echo going down >&2; exit 3", code_dir))
        ended = (await poll_until(service, lambda s: "bad" in s.ended)).ended["bad"]
        assert (ended.status, ended.exit_code, ended.failure_kind) == (
            TrialStatus.FAILED,
            3,
            FailureKind.USER_CODE,
        )
        assert ended.message is not None and "exit code 3" in ended.message

    async def _start_tree(
        self, service, python_command, code_dir, control, trial_id
    ) -> tuple[Submitted, dict]:
        """A trial whose tree has a background sleep, a child and a grandchild that double-forked into setsid."""
        self.script(
            code_dir,
            "tree.py",
            """
            import subprocess
            detach = ("import os, sys, time\\nif os.fork(): sys.exit(0)\\nos.setsid()\\n"
                      "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid()))\\n"
                      "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\\ntime.sleep(600)\\n")
            subprocess.run([sys.executable, "-c", detach, control("detached.pid")], check=True)
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            wait_for("detached.pid")
            pids = {"shell": os.getppid(), "trial": os.getpid(), "child": child.pid,
                    "background": int(open(control("background.pid")).read()),
                    "detached": int(open(control("detached.pid")).read())}
            with open(control("pids.tmp"), "w") as f:
                json.dump(pids, f)
            os.rename(control("pids.tmp"), control("pids.json"))
            time.sleep(600)
            """,
        )
        bg = shlex.quote(os.path.join(control.seen_by_trials, "background.pid"))
        command = (
            f"sleep 600 & echo $! > {bg}; {self.run_command(python_command, 'tree.py', control)}; exit 0"
        )
        submitted = await self.submit(service, self.spec(trial_id, command, code_dir))
        await control.wait_for("pids.json")
        pids = json.loads(control.read_text("pids.json"))
        ticks = {name: control.start_ticks(pid) for name, pid in pids.items()}
        assert all(ticks.values()), f"the trial's processes should all run: {pids} {ticks}"
        return submitted, {pids[name]: ticks[name] for name in pids}

    @staticmethod
    def assert_none_survive(control: TrialHost, processes: dict[int, int | None]) -> None:
        survivors = [pid for pid, ticks in processes.items() if control.start_ticks(pid) == ticks]
        for pid in survivors:  # a failing run must not leave them behind
            control.kill(pid)
        assert survivors == [], f"processes of the trial survived: {survivors}"

    async def test_cancel_ends_the_whole_process_tree(
        self, services, python_command, code_dir, control
    ) -> None:
        service = await services.start()
        _, processes = await self._start_tree(service, python_command, code_dir, control, "tree")
        await service.cancel("tree")
        ended = (await poll_until(service, lambda s: "tree" in s.ended)).ended["tree"]
        assert (ended.status, ended.failure_kind) == (TrialStatus.USER_CANCELED, FailureKind.CANCELED)
        self.assert_none_survive(control, processes)

    async def test_cancel_as_early_stopped(self, services, python_command, code_dir, control) -> None:
        self.script(
            code_dir, "sleepy.py", 'report("PERIODICAL", 0, 0.1); touch("running"); time.sleep(600)\n'
        )
        service = await services.start()
        await self.submit(
            service, self.spec("es", self.run_command(python_command, "sleepy.py", control), code_dir)
        )
        await control.wait_for("running")
        await service.cancel("es", TrialStatus.EARLY_STOPPED)
        seen = await poll_until(service, lambda s: "es" in s.ended)
        assert seen.ended["es"].status == TrialStatus.EARLY_STOPPED
        assert [m.sequence for m in seen.metrics] == [0]

    async def test_close_with_kill_ends_trials(self, services, python_command, code_dir, control) -> None:
        service = await services.start()
        _, processes = await self._start_tree(service, python_command, code_dir, control, "closed")
        await services.close(service, kill_trials=True)
        self.assert_none_survive(control, processes)

    async def test_metrics_arrive_in_order_and_complete(
        self, services, python_command, code_dir, control
    ) -> None:
        self.script(
            code_dir,
            "many.py",
            """
            for i in range(2000):
                report("PERIODICAL", i, {"default": i / 4, "step": i})
            report("FINAL", 0, 123.25)
            """,
        )
        service = await services.start()
        await self.submit(
            service, self.spec("many", self.run_command(python_command, "many.py", control), code_dir)
        )
        seen = await poll_until(service, lambda s: "many" in s.ended)
        assert seen.ended["many"].status == TrialStatus.SUCCEEDED
        periodical = [m for m in seen.metrics if m.type == "PERIODICAL"]
        assert [m.sequence for m in periodical] == list(range(2000))
        assert [json.loads(m.data) for m in periodical] == [
            {"default": i / 4, "step": i} for i in range(2000)
        ]
        assert [(m.type, m.data) for m in seen.metrics[2000:]] == [("FINAL", "123.25")]
        assert seen.problems == []

    async def test_malformed_metrics_are_problems_not_crashes(
        self, services, python_command, code_dir, control
    ) -> None:
        self.script(
            code_dir,
            "malformed.py",
            """
            report("PERIODICAL", 0, raw_value="NaN")
            report("PERIODICAL", 1, raw_value="Infinity")
            frame(b"this is not json\\n")
            report("PERIODICAL", 2, raw_value="{not json either")
            report("PERIODICAL", 3, 0.25)
            report("BOGUS", 4, 1.0)
            report("PERIODICAL", 5, {"accuracy": 0.5})
            huge = (json.dumps({"type": "FINAL", "sequence": 0, "value": "x" * 1_200_000}) + "\\n").encode()
            frame(huge)  # a 7-digit length does not fit NNI's header
            report("FINAL", 0, 0.75)
            """,
        )
        service = await services.start()
        command = self.run_command(python_command, "malformed.py", control)
        await self.submit(service, self.spec("mal", command, code_dir))
        seen = await poll_until(service, lambda s: "mal" in s.ended)
        assert seen.ended["mal"].status == TrialStatus.SUCCEEDED
        assert [(m.type, m.sequence, m.data) for m in seen.metrics] == [
            ("PERIODICAL", 3, "0.25"),
            ("FINAL", 0, "0.75"),
        ]
        messages = "\n".join(p.message for p in seen.problems)
        for expected in (
            "not a finite number",
            "record is not JSON",
            "value is not JSON",
            "unknown metric type",
        ):
            assert expected in messages
        assert "numeric 'default'" in messages and "corrupt metric stream" in messages
        assert all(p.trial_id == "mal" for p in seen.problems)

    async def test_logs_readable_while_running_and_after(
        self, services, python_command, code_dir, control
    ) -> None:
        self.script(
            code_dir,
            "logs.py",
            """
            print("to stdout ü", flush=True)
            print("to stderr", file=sys.stderr, flush=True)
            with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "extra.txt"), "w") as f:
                f.write("extra")
            touch("running"); wait_for("release")
            print("after release", flush=True)
            """,
        )
        service = await services.start()
        command = self.run_command(python_command, "logs.py", control)
        handle = (await self.submit(service, self.spec("logs", command, code_dir))).handle
        await control.wait_for("running")
        assert (await service.read_trial_file("logs", handle, "trial.stdout")).decode() == "to stdout ü\n"
        assert await service.read_trial_file("logs", handle, "stderr") == b"to stderr\n"
        control.touch("release")
        await poll_until(service, lambda s: "logs" in s.ended)
        assert (
            await service.read_trial_file("logs", handle, "stdout") == "to stdout ü\nafter release\n".encode()
        )
        assert await service.read_trial_file("logs", handle, "extra.txt") == b"extra"
        assert json.loads(await service.read_trial_file("logs", handle, "parameter.cfg"))["parameter_id"] == 7
        with pytest.raises(ValueError):
            await service.read_trial_file("logs", handle, "../../../etc/passwd")
        with pytest.raises(ValueError):
            await service.read_trial_file("logs", handle, "/etc/passwd")
        with pytest.raises(FileNotFoundError):
            await service.read_trial_file("logs", handle, "no-such-file")

    async def test_hostile_values_run_exactly_as_given(
        self, services, python_command, tmp_path, control
    ) -> None:
        code_dir = tmp_path / "code dir 'q' \"dq\" ; $(touch pwned) `x` ünï\nnl"
        code_dir.mkdir()
        self.script(
            code_dir,
            "echo.py",
            """
            out = {"argv": sys.argv[2:], "cwd": os.getcwd(), "parameters": parameter_record()["parameters"],
                   "env": os.environ["HOSTILE_VALUE"], "code_dir": os.environ["NNI_CODE_DIR"]}
            with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "echo.json"), "w") as f:
                json.dump(out, f)
            """,
        )
        hostile_text = "\n".join(HOSTILE)
        command = (
            self.run_command(python_command, "echo.py", control) + " " + " ".join(map(shlex.quote, HOSTILE))
        )
        spec = self.spec(
            "hostile",
            command,
            code_dir,
            {"text": hostile_text, "n": 1.5},
            env={"HOSTILE_VALUE": hostile_text},
        )
        service = await services.start()
        handle = (await self.submit(service, spec)).handle
        assert (await poll_until(service, lambda s: "hostile" in s.ended)).ended[
            "hostile"
        ].status == TrialStatus.SUCCEEDED
        echoed = json.loads(await service.read_trial_file("hostile", handle, "echo.json"))
        assert echoed["argv"] == HOSTILE
        expected = self.trial_code_dir(handle, code_dir)
        assert echoed["cwd"] == expected and echoed["code_dir"] == expected
        assert echoed["parameters"] == {"text": hostile_text, "n": 1.5}
        assert echoed["env"] == hostile_text
        assert [p for p in tmp_path.rglob("pwned*")] == []

    async def test_submit_is_idempotent_per_attempt(
        self, services, python_command, code_dir, control
    ) -> None:
        self.script(
            code_dir,
            "once.py",
            """
            while not os.path.exists(os.path.join(SYS_DIR, "keeper.json")):  # the launch is on record
                time.sleep(0.02)
            with open(control("runs.log"), "a") as f:
                f.write("run\\n")
            wait_for("release")
            report("FINAL", 0, 1)
            """,
        )
        spec = self.spec("once", self.run_command(python_command, "once.py", control), code_dir)
        first = await services.start()
        await self.submit(first, spec)
        await control.wait_for("runs.log")
        # the manager died before it recorded the handle: after a restart it submits the attempt again
        await services.close(first, kill_trials=False)
        second = await services.start()
        await self.submit(second, spec)
        control.touch("release")
        seen = await poll_until(second, lambda s: "once" in s.ended)
        assert seen.ended["once"].status == TrialStatus.SUCCEEDED
        assert [(m.type, m.data) for m in seen.metrics] == [("FINAL", "1")]
        assert control.read_text("runs.log") == "run\n"

    async def test_readopt_a_running_trial_delivers_each_metric_once(
        self, services, python_command, code_dir, control
    ) -> None:
        self.script(
            code_dir,
            "long.py",
            """
            for i in range(3):
                report("PERIODICAL", i, i)
            wait_for("release")
            for i in range(3, 5):
                report("PERIODICAL", i, i)
            report("FINAL", 0, 99)
            """,
        )
        first = await services.start()
        command = self.run_command(python_command, "long.py", control)
        handle = (await self.submit(first, self.spec("long", command, code_dir))).handle
        before = await poll_until(first, lambda s: len(s.metrics) == 3)
        await services.close(first, kill_trials=False)
        second = await services.start()
        await second.adopt("long", handle, before.metrics[-1].cursor)
        control.touch("release")
        after = await poll_until(second, lambda s: "long" in s.ended)
        assert after.ended["long"].status == TrialStatus.SUCCEEDED
        assert [(m.type, m.sequence, m.data) for m in after.metrics] == [
            ("PERIODICAL", 3, "3"),
            ("PERIODICAL", 4, "4"),
            ("FINAL", 0, "99"),
        ]

    async def test_adopt_a_trial_that_ended_unwatched(
        self, services, python_command, code_dir, control
    ) -> None:
        self.script(
            code_dir,
            "quick.py",
            'wait_for("release"); report("PERIODICAL", 0, 1); report("FINAL", 0, 2); touch("done"); sys.exit(4)\n',
        )
        first = await services.start()
        command = self.run_command(python_command, "quick.py", control)
        handle = (await self.submit(first, self.spec("quick", command, code_dir))).handle
        await services.close(first, kill_trials=False)
        control.touch("release")
        await control.wait_for("done")
        second = await services.start()
        await second.adopt("quick", handle, {})
        seen = await poll_until(second, lambda s: "quick" in s.ended)
        ended = seen.ended["quick"]
        assert (ended.status, ended.exit_code) == (TrialStatus.FAILED, 4)
        assert [(m.type, m.data) for m in seen.metrics] == [("PERIODICAL", "1"), ("FINAL", "2")]

    async def test_adopt_a_trial_whose_keeper_vanished_reports_lost(
        self, services, python_command, code_dir, control, hard_kill
    ) -> None:
        self.script(code_dir, "doomed.py", 'report("PERIODICAL", 0, 1); touch("running"); time.sleep(600)\n')
        first = await services.start()
        command = self.run_command(python_command, "doomed.py", control)
        handle = (await self.submit(first, self.spec("doomed", command, code_dir))).handle
        await control.wait_for("running")
        await services.close(first, kill_trials=False)
        await hard_kill(handle)
        second = await services.start()
        await second.adopt("doomed", handle, {})
        seen = await poll_until(second, lambda s: "doomed" in s.ended)
        ended = seen.ended["doomed"]
        assert (ended.status, ended.failure_kind) == (TrialStatus.FAILED, FailureKind.INFRASTRUCTURE)
        assert ended.message is not None and ended.message.startswith("lost")
        assert [m.sequence for m in seen.metrics] == [0]
