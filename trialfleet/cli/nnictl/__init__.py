"""``nnictl``: NNI 3.0's command line over trialfleet's library, for NNI users' hands and scripts.

Its parser is nnictl's (argparse, :mod:`.parser`), its defaults NNI's (port 8080, experiments under
``~/nni-experiments/<id>/`` with ``log/nnimanager.log``) and its outputs NNI's formats (:mod:`.output`). What it
does is what ``trialfleet``'s commands do: both call the same functions. With NNI itself installed in the same
environment, ``nnictl`` runs NNI's own (:mod:`.entry`).
"""
