"""What the batch-job platforms share (Slurm, DLTS, OpenPAI, Ray, Azure ML): one trial attempt is one job of the
cluster's scheduler, running the stdlib trial keeper.

A platform of this kind is a client, a state table and a launch script: it subclasses

* :class:`.watcher.JobWatcher` with a ``query(ids)`` hook (one batched look at the jobs it is asked about; the
  watcher paces the looks, backs off while nothing changes, keeps ended jobs and declares a job gone once the
  platform has not known it for a few looks);
* :class:`.outcome.OutcomeTable` over its job record (:class:`.outcome.BatchJob`: a :class:`StateMeaning`,
  ``ended``, ``describe``), which decides how a trial ended from the keeper's record and the job's state;
* :class:`.service.BatchJobService`, which runs the collect loop (one watcher refresh, one look at every trial
  directory, then each trial's start, waiting reason, metrics and end) and leaves the platform its launch,
  its cancel and a few hooks.

The watcher is keyed by job, not by trial: a long-lived worker job that runs many trials (NNI's reuse mode)
is watched once, and its trials are decided against its state.
"""
