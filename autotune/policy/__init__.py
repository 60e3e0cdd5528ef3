"""How the searcher decides what to launch: the pre-launch screen (``prescreen``), what fits in GPU memory (``fit``),
what the study's own results rule out (``learned``), the KV model learnt from launches and the repair of proposals to
it (``kvmodel``, ``repair``) and the stopping rule (``stopping``)."""
