"""The ``trialfleet`` command line: nnictl's commands and options, over :mod:`trialfleet.client`."""
