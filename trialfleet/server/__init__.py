"""The REST server (NNI's routes under ``/api/v1/nni``) and the NNI-shaped read model it shares with the client.

Importing this package is cheap: FastAPI is imported only by :mod:`trialfleet.server.app`.
"""
