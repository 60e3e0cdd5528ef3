"""How a study runs: the driver (``driver``), the Ray cluster it starts or joins (``cluster``), Ctrl-C and the Ray
watchdog (``interrupts``), the study lock, the Optuna searcher (``searcher``) and its study and storage
(``optuna_study``, ``storage``), the runner that runs one trial end to end inside Ray Tune (``runner``), and the
finalist relaunches (``finalist_stage``)."""
