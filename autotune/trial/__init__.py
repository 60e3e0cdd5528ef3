"""The parts of one trial below the study: the server process and how it is started and stopped (``launcher``), the
node-local server registry and GPU slot pools, what crosses the Serve boundary (``replica``), the ``TrialRecord`` a
trial produces, its score, and the durable store of records (``store``). The runner that runs a trial end to end uses
Serve and progress, so it lives in ``autotune.study``."""
