"""The Kubernetes platforms: ``kubeflow`` (TFJob, PyTorchJob), ``frameworkcontroller`` and ``adl`` (AdaptDL).

One custom resource per trial attempt, trial directories on a storage the pods and the manager both mount;
the official ``kubernetes`` client (``pip install trialfleet[kubernetes]``) is imported only when one of them
runs. See docs/kubernetes.md.
"""
