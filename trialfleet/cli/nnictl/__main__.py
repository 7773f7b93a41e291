"""``python -m trialfleet.cli.nnictl``: trialfleet's nnictl, even where NNI is installed too."""

from __future__ import annotations

import sys

from trialfleet.cli.nnictl.entry import CHOICE_ENV, main

if __name__ == "__main__":
    import os

    os.environ[CHOICE_ENV] = "trialfleet"
    sys.exit(main())
