"""The finalist stage's pure parts and store: which configs are finalists, in what order they are relaunched and how
the winner is decided (``choice``), and ``finalists.jsonl`` (``store``). The export reads these as data; the stage that
relaunches finalists through the runner is ``autotune.study.finalist_stage``."""
