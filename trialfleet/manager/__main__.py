import sys

from trialfleet.manager.process import main

sys.exit(main())
