"""How a study runs: the driver (``driver``), the Ray cluster it starts or joins (``cluster``), Ctrl-C and the Ray
watchdog (``interrupts``), the study lock, the Optuna searcher (``searcher``: Ray Tune's side), its proposer
(``proposer``: what to launch next, consulting the policy's rules), its study and storage (``optuna_study``,
``storage``), and the runner that runs one trial end to end inside Ray Tune (``runner``; its ``relaunch`` is what the
finalist stage, ``autotune.finalists.stage``, runs for each relaunch); the study's last step, its export and
the summary it says (``export_step``)."""
