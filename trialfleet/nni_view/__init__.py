"""NNI's view of an experiment: its REST payload shapes (:mod:`.payloads`), read from the experiment's store
(:mod:`.reader`). The REST server answers its GET routes with it over a running manager's store, and
``client.py`` reads a stopped experiment's database with it: both doors sit above this package."""
