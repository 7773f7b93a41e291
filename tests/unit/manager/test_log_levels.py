"""The experiment's logLevel, as the manager process applies it to its own loggers and to libraries'."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from trialfleet.manager.process import CHATTY_LOGGERS, LOG_LEVELS, set_log_level


@pytest.fixture(autouse=True)
def _levels_restored() -> Iterator[None]:
    names = ["", *CHATTY_LOGGERS]
    before = {name: logging.getLogger(name).level for name in names}
    yield
    for name, level in before.items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.parametrize(
    ("log_level", "asyncssh_says"),
    [("info", logging.WARNING), ("error", logging.ERROR), ("debug", logging.DEBUG), ("trace", logging.DEBUG)],
)
def test_asyncssh_says_its_sessions_only_when_debugging(log_level: str, asyncssh_says: int) -> None:
    set_log_level(LOG_LEVELS[log_level])
    assert logging.getLogger().level == LOG_LEVELS[log_level]
    # asyncssh logs to the logger named "asyncssh" and its children ("asyncssh.sftp"), as its docs say
    assert logging.getLogger("asyncssh").getEffectiveLevel() == asyncssh_says  # "Requesting new SSH session"
    assert logging.getLogger("asyncssh.sftp").getEffectiveLevel() == asyncssh_says
    assert (
        logging.getLogger("trialfleet.training_services.remote").getEffectiveLevel() == LOG_LEVELS[log_level]
    )
