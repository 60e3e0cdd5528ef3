"""The finalist stage, whole: which configs are finalists, in what order they are relaunched and how the winner is
decided (``choice``); what it produces, as data (``outcome``: the relaunches, the stage plans, the decision and the
study's ``FinalistOutcome``); ``finalists.jsonl`` (``store``); and the stage that relaunches them on the study's Ray
cluster (``stage``, given the runner's relaunch by the driver). The export imports ``outcome`` and nothing else of
this package (``tests/test_import_graph.py``)."""
