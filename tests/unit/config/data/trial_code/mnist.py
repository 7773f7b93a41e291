"""Stand-in trial script: the config tests only need the code directory to exist."""
