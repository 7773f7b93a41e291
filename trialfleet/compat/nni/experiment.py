"""``nni.experiment``: NNI's Python experiment API, served by trialfleet's (``trialfleet.Experiment``)."""

from __future__ import annotations

from ._trialfleet import trialfleet_package

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def __getattr__(name: str) -> Any:
    # Any other public name (config classes...) is looked up on trialfleet as well, so that
    # trialfleet decides what it offers instead of this list going stale.
    if name.startswith("__"):
        raise AttributeError(name)
    package = trialfleet_package()
    try:
        return getattr(package, name)
    except AttributeError:
        raise AttributeError(
            f"module {__name__!r} has no attribute {name!r} (trialfleet does not provide it)"
        ) from None
