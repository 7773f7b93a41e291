import sys

from trialfleet.manager.process import main
from trialfleet.process_end import leave

try:
    code = main()
finally:
    leave()
sys.exit(code)
