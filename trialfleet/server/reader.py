"""The server's name for the read side of an experiment, which lives below the doors in :mod:`trialfleet.nni_view`
(``client.py`` reads stopped experiments with it too)."""

from __future__ import annotations

from trialfleet.nni_view.reader import LIST_CHUNK, ExperimentReader

__all__ = ["LIST_CHUNK", "ExperimentReader"]
