"""How the searcher decides what to launch: the rule contract (``base``: ``Rule``, ``Rules``) and the study's rules in
order (``defaults``), one module per rule (``repeats``, ``learn``, ``repairing``, ``rejected_flags``, ``defer``), and
the computations they wrap: which seed points go first and last (``prescreen``), what fits in GPU memory (``fit``),
what the study's own results rule out (``learned``), the KV model learnt from launches and the repair of proposals to
it (``kvmodel``, ``repair``); the stopping rule the driver applies (``stopping``). The proposer that asks Optuna and
consults these rules is ``autotune.study.proposer``."""
