"""The experiment manager: its loop, its decisions, and how its process is started."""
