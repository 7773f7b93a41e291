"""The trial keeper: a tiny stdlib-only program that runs one trial on any worker.

It is shipped as the single file ``keeper.py`` (uploaded to SSH hosts, referenced from sbatch scripts,
started directly on local) and imports nothing of trialfleet. See ``keeper.py`` for the protocol.
"""
