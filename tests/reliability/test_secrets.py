"""Case 4 of the failure matrix: secret environment values never reach a file autotune writes."""

from __future__ import annotations

import json
import stat
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from autotune import runner
from autotune.driver import _spec_json
from autotune.export import export_study
from autotune.records import TrialOutcome
from autotune.replica import Teardown
from autotune.space import load_study
from tests.export.conftest import LEVELS, OBJECTIVES, make_record
from tests.test_runner import FakeDeployer, FakeReplica

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "hf_abcdefghijklmnopqrstuvwxyz0123"
OPENAI = "sk-proj-0123456789abcdef"
CUSTOM = "https://user:hunter2@proxy.internal:3128"


def secret_spec(tmp_path: Path):  # type: ignore[no-untyped-def]
    doc = yaml.safe_load((ROOT / "search_spaces" / "smoke.yaml").read_text())
    doc["server"]["env"] = {"NCCL_NVLS_ENABLE": "0", "HF_TOKEN": TOKEN, "OPENAI_API_KEY": OPENAI,
                            "HTTPS_PROXY": CUSTOM}
    doc["server"]["secret_env"] = ["HTTPS_PROXY"]
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_study(path)


def _leaks(text: str) -> list[str]:
    return [s for s in (TOKEN, OPENAI, CUSTOM) if s in text]


def test_study_json_holds_no_secret(tmp_path: Path) -> None:
    text = json.dumps(_spec_json(secret_spec(tmp_path)))
    assert _leaks(text) == [] and "HF_TOKEN" in text and "HTTPS_PROXY" in text


def test_trial_record_and_log_hold_no_secret_but_the_server_gets_it(tmp_path: Path) -> None:
    spec = secret_spec(tmp_path)

    log = f"server started with token {TOKEN}\n"
    replica = FakeReplica(report=replace(FakeReplica().report, log_text=log),
                          teardown=Teardown(error=f"proxy {CUSTOM} refused"))  # a secret in the record's message
    deployer = FakeDeployer(replica)
    params = {"mem_fraction_static": 0.8, "max_running_requests": 16}
    record, log_text = runner.run_trial(spec, params, trial_id="t", number=0, deployer=deployer,
                                        send=lambda event: None)
    server_env = deployer.requests[0].launch.env  # what the replica (and so the server) is given
    assert server_env["HF_TOKEN"] == TOKEN and server_env["HTTPS_PROXY"] == CUSTOM
    assert record.outcome is TrialOutcome.COMPLETE and "proxy" in record.message
    assert _leaks(json.dumps(record.to_json())) == [] and _leaks(log_text) == []
    assert record.env["HF_TOKEN"] == "<redacted>" and record.env["NCCL_NVLS_ENABLE"] == "0"


def test_exports_reference_secrets_and_are_private(tmp_path: Path) -> None:
    env = {"NCCL_NVLS_ENABLE": "0", "HF_TOKEN": TOKEN}  # a record written before redaction existed
    recs = [make_record(0, tputs={1: 100.0, 8: 500.0, 32: 900.0, 128: 1000.0}, env=env)]
    export_study(tmp_path, study_name="demo", objectives=OBJECTIVES, records=recs, load_levels=LEVELS)
    best = tmp_path / "best"
    for path in best.iterdir():
        assert _leaks(path.read_text()) == [], path.name
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path.name
    assert stat.S_IMODE(best.stat().st_mode) == 0o700
    launch = (best / "launch.sh").read_text()
    assert 'export HF_TOKEN="${HF_TOKEN:?' in launch and "export NCCL_NVLS_ENABLE=0" in launch
    assert "HF_TOKEN" in (best / "serve_config.yaml").read_text()  # named in its header, not stored


def test_plain_word_and_short_secret_values_are_not_searched_in_text() -> None:
    """RAY_AUTH_MODE=token must not turn ``--speculative-num-draft-tokens`` into ``--speculative-num-draft-<redacted>s``."""
    from autotune.secrets import redact_text, secret_values

    env = {"RAY_AUTH_MODE": "token", "SOME_KEY": "1234", "HF_TOKEN": "hf_abcdefgh12345678", "DB_PASSWORD": "hunter22"}
    values = secret_values(env)
    text = "--speculative-num-draft-tokens 4 token=hf_abcdefgh12345678 pw hunter22 1234"
    out = redact_text(text, values)
    assert "--speculative-num-draft-tokens 4" in out
    assert "hf_abcdefgh12345678" not in out and "hunter22" not in out
    assert out.endswith("1234")


def test_the_searcher_tune_pickles_into_its_folder_holds_no_secret(tmp_path: Path) -> None:
    from ray import cloudpickle

    from autotune.optuna_study import open_study
    from autotune.searcher import OptunaStudySearcher

    spec = secret_spec(tmp_path)
    study = open_study(spec, f"sqlite:///{tmp_path / 'study.db'}")
    s = OptunaStudySearcher(spec, study, budget=1, on_record=lambda r, log: None,
                            make_missing_record=lambda *a: pytest.fail("unexpected"))
    blob = cloudpickle.dumps(s)
    assert [v for v in (TOKEN, OPENAI, CUSTOM) if v.encode() in blob] == []
    assert s.spec.server.env["HF_TOKEN"] == TOKEN  # the live searcher is untouched


def test_flags_are_secret_by_word_not_by_substring() -> None:
    """--api-key and --hf-token are secrets; --speculative-num-draft-tokens and --tokenizer-path are settings (a
    substring match redacted the draft-token count from records and exported commands)."""
    from autotune.records import TrialOutcome, TrialRecord
    from autotune.runner import redact_record
    from autotune.secrets import is_secret_flag

    assert is_secret_flag("api-key") and is_secret_flag("hf-token") and is_secret_flag("admin-password")
    assert not is_secret_flag("speculative-num-draft-tokens") and not is_secret_flag("tokenizer-path")
    assert not is_secret_flag("max-prefill-tokens") and is_secret_flag("my-flag", ("my-flag",))
    rec = TrialRecord(study="s", trial_id="t", number=0, params={}, argv=["--api-key", "sk-abcdef0123456789xyz"],
                      flags={"api-key": "sk-abcdef0123456789xyz", "speculative-num-draft-tokens": 12}, env={},
                      outcome=TrialOutcome.COMPLETE)
    safe, _ = redact_record(rec, "", {})
    assert safe.flags["speculative-num-draft-tokens"] == 12 and safe.flags["api-key"] != "sk-abcdef0123456789xyz"
    assert "sk-abcdef0123456789xyz" not in " ".join(safe.argv)
