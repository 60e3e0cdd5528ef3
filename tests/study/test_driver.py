"""The study driver's checks before a resume, without Ray."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autotune.core.errors import AutotuneError
from autotune.space import load_study
from autotune.study.driver import StudyDriver, _spec_json

ROOT = Path(__file__).resolve().parents[2]


HAND_SET = {"mem_fraction_static": 0.8, "max_running_requests": 64, "cuda_graph_max_bs_decode": 64}


@pytest.mark.parametrize(
    ("path", "value", "key"),
    [
        (("workload", "properties"), {"SGLANG_SIMULATE_ACC_LEN": "2.0"}, "workload_properties"),
        (("study", "speculative_caps"), "sglang-default", "speculative_caps"),
        (("study", "points_to_evaluate"), [HAND_SET], "points_to_evaluate"),
        (("study", "baseline"), HAND_SET, "baseline_point"),
    ],
)
def test_a_resume_refuses_a_study_file_that_changes_what_every_launch_runs(tmp_path: Path, path, value, key) -> None:  # type: ignore[no-untyped-def]
    """workload.properties (in every trial's environment) and study.speculative_caps (a speculative point's cap and
    graph ceiling) change what a point launches as; a resume used to accept them, so the measured points were answered
    from launches that ran otherwise and the export mixed the two. The seed points and the baseline (the configuration
    the verdict judges against) are enqueued only when a study opens empty: a resume used to accept an edited list or
    baseline silently, never launched it, and judged the export against another (or an unmeasured) configuration."""
    first = load_study(ROOT / "search_spaces" / "smoke.yaml")
    driver = StudyDriver(first, results_dir=tmp_path / "r")
    driver.store.ensure()
    driver.store.write_json("study.json", _spec_json(first))
    StudyDriver(first, results_dir=tmp_path / "r")._check_same_study()  # the same file resumes

    doc = yaml.safe_load((ROOT / "search_spaces" / "smoke.yaml").read_text())
    doc[path[0]][path[1]] = value
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(AutotuneError, match=f"different {key};"):
        StudyDriver(load_study(edited), results_dir=tmp_path / "r")._check_same_study()
