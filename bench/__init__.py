"""trialfleet's benchmark suite: the same workloads on trialfleet and on NNI 3.0, on one machine, in one run.

``python -m bench`` runs everything (``--quick`` for a smoke run of a few minutes); see ``bench/README.md``.
Not part of the test suite: nothing here is collected by pytest.
"""
