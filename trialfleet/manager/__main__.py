"""``python -m trialfleet.manager``: the manager process's entry point and composition root. It hands the
manager its web server's loader, so that nothing below the doors imports the server (docs/architecture.md)."""

import sys

from trialfleet.manager.process import main
from trialfleet.process_end import leave
from trialfleet.server import load_app

try:
    code = main(load_app)
finally:
    leave()
sys.exit(code)
