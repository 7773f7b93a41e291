"""Test kits shipped with trialfleet, for built-in and third-party platforms alike.

The training-service contract suite runs against any platform in a few lines of pytest::

    import pytest
    from trialfleet.testing import TrainingServiceContract, make_context

    class TestMyPlatform(TrainingServiceContract):
        @pytest.fixture
        def service_factory(self):
            return MyTrainingService

        @pytest.fixture
        def experiment_context(self, tmp_path):
            return make_context(tmp_path / "experiment", MyConfig(trial_command="unused", ...))

        @pytest.fixture
        def hard_kill(self):
            async def kill(handle): ...  # end the trial's keeper and tree as a crashed worker would
            return kill

See docs/plugins.md. It needs pytest and pytest-asyncio (``asyncio_mode = "auto"``).
"""

from __future__ import annotations

from trialfleet.testing.contract import TrainingServiceContract
from trialfleet.testing.harness import (
    HOSTILE,
    TRIAL_PRELUDE,
    LocalTrialHost,
    Seen,
    Services,
    TrialHost,
    make_context,
    poll_until,
    process_start_ticks,
    wait_for_file,
    wait_until_gone,
)

__all__ = [
    "HOSTILE",
    "TRIAL_PRELUDE",
    "LocalTrialHost",
    "Seen",
    "Services",
    "TrainingServiceContract",
    "TrialHost",
    "make_context",
    "poll_until",
    "process_start_ticks",
    "wait_for_file",
    "wait_until_gone",
]
