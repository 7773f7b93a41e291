"""The Kubernetes platforms (``kubeflow``, ``frameworkcontroller``, ``adl``)'s config (accepted so NNI configs load; refused at start until its service lands)."""
