"""The study driver's checks before a resume, without Ray."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autotune.core.errors import AutotuneError
from autotune.space import load_study
from autotune.study.driver import StudyDriver, _spec_json

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("workload", "properties"), {"SGLANG_SIMULATE_ACC_LEN": "2.0"}),
        (("study", "speculative_caps"), "sglang-default"),
    ],
)
def test_a_resume_refuses_a_study_file_that_changes_what_every_launch_runs(tmp_path: Path, path, value) -> None:  # type: ignore[no-untyped-def]
    """workload.properties (in every trial's environment) and study.speculative_caps (a speculative point's cap and
    graph ceiling) change what a point launches as; a resume used to accept them, so the measured points were answered
    from launches that ran otherwise and the export mixed the two."""
    first = load_study(ROOT / "search_spaces" / "smoke.yaml")
    driver = StudyDriver(first, results_dir=tmp_path / "r")
    driver.store.ensure()
    driver.store.write_json("study.json", _spec_json(first))
    StudyDriver(first, results_dir=tmp_path / "r")._check_same_study()  # the same file resumes

    doc = yaml.safe_load((ROOT / "search_spaces" / "smoke.yaml").read_text())
    doc[path[0]][path[1]] = value
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(
        AutotuneError, match=f"different {'workload_properties' if path[1] == 'properties' else path[1]}"
    ):
        StudyDriver(load_study(edited), results_dir=tmp_path / "r")._check_same_study()
