"""The GPU-memory prediction against the H200 evidence studies (benchmarks/search/oom.py)."""

from __future__ import annotations

from benchmarks.search.oom import ROOT, main


def test_a_study_whose_model_sizes_are_unknown_is_left_out_with_its_reason(capsys) -> None:  # type: ignore[no-untyped-def]
    """The real-weight NGRAM study served a model with no dummy shape and no config.json here: it is left out, said
    on stderr, and the other studies are still compared (the default run reads every h200 evidence study)."""
    evidence = ROOT / "results" / "evidence"
    assert main([str(evidence / "h200-real-ngram-sharegpt-rate-8"), str(evidence / "h200-tp1-speculative")]) == 0
    out = capsys.readouterr()
    assert "left out h200-real-ngram-sharegpt-rate-8: " in out.err and "smollm2-135m" in out.err
    assert "| h200-tp1-speculative | 7 | 3 | 3 |" in out.out
