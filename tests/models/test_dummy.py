"""The dummy-model generator: shapes, config files, the hand-written tokenizer, parameter counts, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.models.dummy import N_SPECIAL, SHAPES, ModelShapeError, main, param_count, resolved_config, write_model

REQUIRED = ("shape", "llama-1b", "llama-8b", "eagle3-llama-1b", "eagle3-llama-8b", "dsv3-small", "dsv3-large")


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def test_every_required_shape_is_there() -> None:
    assert set(REQUIRED[1:]) <= set(SHAPES)
    assert SHAPES["eagle3-llama-1b"].drafter_for == "llama-1b"
    assert SHAPES["eagle3-llama-8b"].config["target_hidden_size"] == SHAPES["llama-8b"].config["hidden_size"]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_written_directory_is_complete_and_consistent(shape: str, tmp_path: Path) -> None:
    out = write_model(shape, tmp_path / shape)
    assert out == tmp_path / shape
    cfg = read(out / "config.json")
    vocab = cfg["vocab_size"]
    assert cfg["architectures"] == [SHAPES[shape].architecture]
    assert (cfg["bos_token_id"], cfg["eos_token_id"]) == (vocab - N_SPECIAL, vocab - N_SPECIAL + 1)
    gen = read(out / "generation_config.json")
    assert gen["eos_token_id"] == cfg["eos_token_id"] and gen["do_sample"] is False
    tok_cfg = read(out / "tokenizer_config.json")
    assert tok_cfg["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert tok_cfg["model_max_length"] == cfg["max_position_embeddings"]
    assert "{{" in tok_cfg["chat_template"]  # bench_serving warns without a chat template

    tok = read(out / "tokenizer.json")  # well-formed JSON, the tokenizers serialization
    assert tok["model"]["type"] == "WordLevel" and tok["pre_tokenizer"] == {"type": "WhitespaceSplit"}
    words = tok["model"]["vocab"]
    assert sorted(words.values()) == list(range(vocab)), "every id of the model's vocab has exactly one token"
    assert words["t0"] == 0 and words[f"t{vocab - N_SPECIAL - 1}"] == vocab - N_SPECIAL - 1
    added = {a["content"]: a["id"] for a in tok["added_tokens"]}
    assert len(added) == N_SPECIAL and all(a["special"] and not a["normalized"] for a in tok["added_tokens"])
    assert added["<|bos|>"] == cfg["bos_token_id"] and added["<|eos|>"] == cfg["eos_token_id"]
    assert all(words[name] == i for name, i in added.items())
    assert tok["model"]["unk_token"] in added
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        assert tok_cfg[key] in added


def test_tokenizer_round_trip_with_the_real_library(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")  # present on the GPU image, not a dependency here
    out = write_model("llama-1b", tmp_path / "m")
    tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    ids = [10, 4242, 128000, 127999, 128255]
    assert tok.encode(tok.decode(ids, skip_special_tokens=False)).ids == ids
    assert tok.get_vocab_size() == 128256


def test_layers_override_and_its_errors(tmp_path: Path) -> None:
    assert read(write_model("llama-8b", tmp_path / "a", layers=2) / "config.json")["num_hidden_layers"] == 2
    assert resolved_config("dsv3-large", 3)["num_hidden_layers"] == 3
    with pytest.raises(ModelShapeError, match="--layers 2"):
        resolved_config("dsv3-small", 1)  # its first layer is dense: no MoE layer would remain
    with pytest.raises(ModelShapeError, match=">= 1"):
        resolved_config("llama-1b", 0)
    with pytest.raises(ModelShapeError, match="llama-1b, llama-8b"):
        write_model("llama-70b", tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_parameter_counts_match_the_published_models() -> None:
    assert param_count(SHAPES["llama-1b"].config) == 1_235_814_400  # Llama-3.2-1B
    assert param_count(SHAPES["llama-8b"].config) == 8_030_261_248  # Llama-3.1-8B
    full = resolved_config("dsv3-large")
    full.update(num_hidden_layers=61, first_k_dense_replace=3)  # DeepSeek-V3 itself: 671 B without the MTP layer
    assert abs(param_count(full) / 671.0e9 - 1) < 0.005


def test_dsv3_large_fits_eight_h200s_with_room_for_kv_cache() -> None:
    per_gpu_gb = param_count(SHAPES["dsv3-large"].config) * 2 / 8 / 1e9  # bf16, tensor parallel 8
    assert 15 < per_gpu_gb < 0.25 * 141, per_gpu_gb


def test_cli_list_and_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["--list"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in REQUIRED) and "82.99B" in listing
    assert main(["llama-1b"]) == 2
    assert main(["nope", str(tmp_path)]) == 2
    assert "unknown model shape 'nope'" in capsys.readouterr().err


def test_module_entry_point(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-m", "autotune.models.dummy", "eagle3-llama-1b", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "wrote eagle3-llama-1b" in proc.stdout
    assert read(tmp_path / "d" / "config.json")["architectures"] == ["LlamaForCausalLMEagle3"]
