"""Case 4 of the failure matrix: secret environment values never reach a file autotune writes."""

from __future__ import annotations

import json
import stat
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from autotune.export import export_study
from autotune.space import load_study
from autotune.study import runner
from autotune.study.driver import _spec_json
from autotune.trial.records import TrialOutcome
from autotune.trial.replica import Teardown
from tests.export.conftest import LEVELS, OBJECTIVES, make_record, with_argv
from tests.study.test_runner import FakeDeployer, FakeReplica

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "hf_abcdefghijklmnopqrstuvwxyz0123"
OPENAI = "sk-proj-0123456789abcdef"
CUSTOM = "https://user:hunter2@proxy.internal:3128"


def secret_spec(tmp_path: Path):  # type: ignore[no-untyped-def]
    doc = yaml.safe_load((ROOT / "search_spaces" / "smoke.yaml").read_text())
    doc["server"]["env"] = {"NCCL_NVLS_ENABLE": "0", "HF_TOKEN": TOKEN, "OPENAI_API_KEY": OPENAI, "HTTPS_PROXY": CUSTOM}
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
    replica = FakeReplica(
        report=replace(FakeReplica().report, log_text=log), teardown=Teardown(error=f"proxy {CUSTOM} refused")
    )  # a secret in the record's message
    deployer = FakeDeployer(replica)
    params = {"mem_fraction_static": 0.8, "max_running_requests": 16}
    record, log_text = runner.run_trial(
        spec, params, trial_id="t", number=0, deployer=deployer, send=lambda event: None
    )
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
    from autotune.core.secrets import redact_text, secret_values

    env = {"RAY_AUTH_MODE": "token", "SOME_KEY": "1234", "HF_TOKEN": "hf_abcdefgh12345678", "DB_PASSWORD": "hunter22"}
    values = secret_values(env)
    text = "--speculative-num-draft-tokens 4 token=hf_abcdefgh12345678 pw hunter22 1234"
    out = redact_text(text, values)
    assert "--speculative-num-draft-tokens 4" in out
    assert "hf_abcdefgh12345678" not in out and "hunter22" not in out
    assert out.endswith("1234")


def test_the_searcher_tune_pickles_into_its_folder_holds_no_secret(tmp_path: Path) -> None:
    from ray import cloudpickle

    from autotune.study.optuna_study import open_study
    from autotune.study.searcher import OptunaStudySearcher

    spec = secret_spec(tmp_path)
    study = open_study(spec, f"sqlite:///{tmp_path / 'study.db'}")
    s = OptunaStudySearcher(
        spec, study, budget=1, on_record=lambda r, log: None, make_missing_record=lambda *a: pytest.fail("unexpected")
    )
    blob = cloudpickle.dumps(s)
    assert [v for v in (TOKEN, OPENAI, CUSTOM) if v.encode() in blob] == []
    assert s.spec.server.env["HF_TOKEN"] == TOKEN  # the live searcher is untouched


# Issue 28 cases 2 and 3: secrets by declaration and by shape, never by a name's substring.
API_KEY = "sk-live-0123456789abcdefXYZ"  # a known credential flag of the engine (--api-key)
DECLARED = "Declared-Flag-Value-42"  # a flag the study declares secret (server.secret_flags)
DB_PASS = "hunter2hunter2"  # a variable whose name is a password's
DB_URL = "postgresql://app:pw-in-the-url-77@db.internal:5432/app"  # a password in a URL's userinfo
FLAG_SECRETS = (API_KEY, DECLARED, DB_PASS, "pw-in-the-url-77")


def flag_secret_spec(tmp_path: Path, *, declared: bool = True):  # type: ignore[no-untyped-def]
    doc = yaml.safe_load((ROOT / "search_spaces" / "smoke.yaml").read_text())
    doc["server"]["flags"] = {
        **doc["server"].get("flags", {}),
        "api-key": API_KEY,
        "tokenizer-path": "/models/tok-7b",
        "skip-tokenizer-init": True,
    }
    doc["server"]["env"] = {"TOKENIZERS_PARALLELISM": "false", "DB_PASS": DB_PASS, "DATABASE_URL": DB_URL}
    if declared:
        doc["server"]["flags"]["custom-credential"] = DECLARED
        doc["server"]["secret_flags"] = ["custom-credential"]
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_study(path)


def _flag_leaks(data: bytes | str) -> list[str]:
    blob = data.encode() if isinstance(data, str) else data
    return [s for s in FLAG_SECRETS if s.encode() in blob]


def _as_sglang(record):  # type: ignore[no-untyped-def]
    """An SGLang record of the export tests with the measured record's study flags and environment."""
    from autotune.export.command import option_argv

    assert record.launch is not None
    names = ("api-key", "custom-credential", "tokenizer-path", "skip-tokenizer-init")
    ours = [o for o in record.launch.options if o[0] in names]
    base = make_record(0, tputs={1: 100.0, 8: 500.0, 32: 900.0, 128: 1000.0})
    return replace(with_argv(base, [*base.argv, *option_argv(ours)]), env=record.env, flags=record.flags)


def test_a_known_credential_flag_is_kept_out_of_study_json_and_tunes_pickle(tmp_path: Path) -> None:
    """Case 2: records redacted --api-key, but study.json and the searcher state Tune pickles kept it verbatim."""
    from ray import cloudpickle

    from autotune.study.optuna_study import open_study
    from autotune.study.searcher import OptunaStudySearcher

    spec = flag_secret_spec(tmp_path, declared=False)
    text = json.dumps(_spec_json(spec))
    assert _flag_leaks(text) == [] and '"api-key": "<redacted>"' in text
    study = open_study(spec, f"sqlite:///{tmp_path / 'study.db'}")
    s = OptunaStudySearcher(
        spec, study, budget=1, on_record=lambda r, log: None, make_missing_record=lambda *a: pytest.fail("unexpected")
    )
    assert _flag_leaks(cloudpickle.dumps(s)) == []
    assert s.spec.server.flags["api-key"] == API_KEY  # the live searcher is untouched


def test_declared_and_shaped_secrets_never_reach_a_record_a_log_or_the_export(tmp_path: Path) -> None:
    spec = flag_secret_spec(tmp_path)
    log = f"args: --api-key {API_KEY} --custom-credential {DECLARED}; db {DB_URL}; pass {DB_PASS}\n"
    replica = FakeReplica(report=replace(FakeReplica().report, log_text=log, argv=()))  # the launch's argv is recorded
    deployer = FakeDeployer(replica)
    record, log_text = runner.run_trial(
        spec,
        {"mem_fraction_static": 0.8, "max_running_requests": 16},
        trial_id="t",
        number=0,
        deployer=deployer,
        send=lambda event: None,
    )
    launched = deployer.requests[0].launch
    assert API_KEY in launched.argv and DECLARED in launched.argv and launched.env["DB_PASS"] == DB_PASS
    assert _flag_leaks(json.dumps(record.to_json())) == [] and _flag_leaks(log_text) == [], log_text
    assert _flag_leaks(json.dumps(_spec_json(spec))) == []
    export_study(tmp_path, study_name="demo", objectives=OBJECTIVES, load_levels=LEVELS, records=[_as_sglang(record)])
    for path in (tmp_path / "best").iterdir():
        assert _flag_leaks(path.read_text()) == [], path.name
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path.name
    launch = (tmp_path / "best" / "launch.sh").read_text()
    assert 'export DB_PASS="${DB_PASS:?' in launch and 'export DATABASE_URL="${DATABASE_URL:?' in launch
    assert '--api-key "${API_KEY:?' in launch, launch


def test_names_that_only_contain_a_pattern_are_written_and_exported_as_measured(tmp_path: Path) -> None:
    """Case 3: --tokenizer-path '<redacted>', and TOKENIZERS_PARALLELISM demanded from the environment, broke launch.sh."""
    spec = flag_secret_spec(tmp_path)
    replica = FakeReplica(report=replace(FakeReplica().report, argv=()))
    record, _ = runner.run_trial(
        spec,
        {"mem_fraction_static": 0.8, "max_running_requests": 16},
        trial_id="t",
        number=0,
        deployer=FakeDeployer(replica),
        send=lambda event: None,
    )
    assert record.flags["tokenizer-path"] == "/models/tok-7b" and record.env["TOKENIZERS_PARALLELISM"] == "false"
    assert "/models/tok-7b" in record.argv and "--skip-tokenizer-init" in record.argv
    data = _spec_json(spec)
    assert data["server"]["flags"]["tokenizer-path"] == "/models/tok-7b"
    assert data["server"]["env"]["TOKENIZERS_PARALLELISM"] == "false"
    export_study(tmp_path, study_name="demo", objectives=OBJECTIVES, load_levels=LEVELS, records=[_as_sglang(record)])
    launch = (tmp_path / "best" / "launch.sh").read_text()
    assert "--tokenizer-path /models/tok-7b" in launch and "--skip-tokenizer-init" in launch
    assert "export TOKENIZERS_PARALLELISM=false" in launch


@pytest.mark.parametrize(
    ("name", "value", "secret"),
    [
        ("TOKENIZERS_PARALLELISM", "false", False),
        ("tokenizer-path", "/m/tok", False),
        ("skip-tokenizer-init", "True", False),
        ("speculative-num-draft-tokens", "4", False),
        ("RAY_AUTH_MODE", "token", False),
        ("max-total-tokens", "4096", False),
        ("KEYBOARD_LAYOUT", "us", False),
        ("HF_TOKEN", "x", True),
        ("OPENAI_API_KEY", "x", True),
        ("AWS_SECRET_ACCESS_KEY", "x", True),
        ("DB_PASS", "x", True),
        ("MYSQL_PWD", "x", True),
        ("api-key", "x", True),
        ("hf-token", "x", True),
        ("DATABASE_URL", "postgresql://u:p@h/d", True),
        ("HTTPS_PROXY", "http://user:pw@proxy:3128", True),
        ("HTTPS_PROXY", "http://proxy:3128", False),
        ("SOME_VALUE", "hf_" + "a" * 30, True),
    ],
)
def test_secret_by_declaration_and_shape(name: str, value: str, secret: bool) -> None:
    from autotune.core.secrets import is_secret

    assert is_secret(name, value=value) is secret


def test_a_study_with_only_a_secret_flag_gets_a_private_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autotune.study import driver as driver_mod
    from autotune.trial import registry

    (tmp_path / "in").mkdir()
    spec = flag_secret_spec(tmp_path / "in", declared=False)
    spec = replace(spec, server=spec.server.model_copy(update={"env": {"TOKENIZERS_PARALLELISM": "false"}}))
    monkeypatch.setattr(registry, "sweep", lambda *a, **k: [])
    monkeypatch.setattr(driver_mod.StudyDriver, "_run_tune", lambda *a, **k: None)
    driver_mod.StudyDriver(spec, results_dir=tmp_path / "results").run()
    root = tmp_path / "results" / spec.name
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "study.json").stat().st_mode) & 0o077 == 0
    assert _flag_leaks((root / "study.json").read_text()) == []


def test_flags_are_secret_by_word_not_by_substring() -> None:
    """--api-key and --hf-token are secrets; --speculative-num-draft-tokens and --tokenizer-path are settings (a
    substring match redacted the draft-token count from records and exported commands)."""
    from autotune.core.secrets import is_secret
    from autotune.study.runner import redact_record
    from autotune.trial.records import TrialOutcome, TrialRecord

    assert is_secret("api-key") and is_secret("hf-token") and is_secret("admin-password")
    assert not is_secret("speculative-num-draft-tokens") and not is_secret("tokenizer-path")
    assert not is_secret("max-prefill-tokens") and is_secret("my-flag", ("my-flag",))
    rec = TrialRecord(
        study="s",
        trial_id="t",
        number=0,
        params={},
        argv=["--api-key", "sk-abcdef0123456789xyz"],
        flags={"api-key": "sk-abcdef0123456789xyz", "speculative-num-draft-tokens": 12},
        env={},
        outcome=TrialOutcome.COMPLETE,
    )
    safe, _ = redact_record(rec, "", {})
    assert safe.flags["speculative-num-draft-tokens"] == 12 and safe.flags["api-key"] != "sk-abcdef0123456789xyz"
    assert "sk-abcdef0123456789xyz" not in " ".join(safe.argv)


def test_the_searcher_tune_pickles_holds_no_secret_even_through_a_driver_callback(tmp_path: Path) -> None:
    """A bound method of the driver handed to the searcher (the time box's reserve) carried the driver, and with it the
    unredacted spec, into tuner.pkl: the interrupted study's HF_TOKEN was found there."""
    from ray import cloudpickle

    from autotune.study.optuna_study import open_study
    from autotune.study.searcher import OptunaStudySearcher

    doc = yaml.safe_load((ROOT / "search_spaces" / "smoke.yaml").read_text())
    doc["server"]["env"] = {"HF_TOKEN": "hf_pickledSecretValue0123456789"}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    spec = load_study(path)

    class Driver:
        def __init__(self) -> None:
            self.spec = spec

        def reserve(self) -> float:
            return 0.0

    s = OptunaStudySearcher(
        spec,
        open_study(spec, f"sqlite:///{tmp_path / 'study.db'}"),
        budget=2,
        on_record=lambda r, log: None,
        make_missing_record=lambda *a: pytest.fail("unexpected"),
        reserve_s=Driver().reserve,
        stop_after_s=60.0,
    )
    s.suggest("a")
    assert b"hf_pickledSecretValue0123456789" not in cloudpickle.dumps(s)
