"""The headless CLI as a user runs it: a subprocess, real files, real output."""
import json
import subprocess
import sys

import pytest
from tests.kit import ROOT



def cli(*args, check=True):
    p = subprocess.run([sys.executable, "-m", "engine", *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    if check:
        assert p.returncode == 0, p.stderr
    return p


@pytest.mark.model
def test_cli_json_on_the_real_model_has_every_documented_field(tmp_path, smol):
    trace = tmp_path / "trace.jsonl"
    out = json.loads(cli("run", "demos/mixed.json", "--json", "--trace", str(trace),
                         "--lanes", "static,continuous,dynamic").stdout)
    assert set(out["lanes"]) == {"static", "continuous", "dynamic"} and out["simulated"] is False
    lane = out["lanes"]["continuous"]
    for key in ("steps", "tokens", "tokens_per_step", "slot_use", "mean_ttft_steps", "mean_latency_steps",
                "wall_s", "tokens_per_s", "requests"):
        assert key in lane
    r1 = lane["requests"]["R1"]
    assert set(r1) >= {"arrival", "first_token_step", "finish_step", "return_step", "ttft_steps",
                       "latency_steps", "tokens", "token_ids", "text"}
    assert r1["tokens"] == 8 and len(r1["token_ids"]) == 8 and "Paris" in r1["text"]
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert len(lines) == 15 + 9 + 15
    assert {l["lane"] for l in lines} == {"static", "continuous", "dynamic"}
    assert all(len(l["slots"]) == 4 and "ms" in l for l in lines)


@pytest.mark.slow
def test_cli_table_and_simulator_says_it_is_simulated():
    p = cli("run", "demos/one-long.json", "--backend", "sim")
    assert "SIMULATED" in p.stdout
    assert [l.split()[1] for l in p.stdout.splitlines() if l.startswith(("static ", "continuous "))] == ["14", "12"]


@pytest.mark.slow
def test_cli_missing_model_is_one_clear_line(tmp_path):
    p = cli("run", "demos/mixed.json", "--model", str(tmp_path / "nope"), check=False)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "model not found" in p.stderr


@pytest.mark.slow
def test_cli_broken_model_is_one_clear_line(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file at all")
    p = cli("run", "demos/mixed.json", "--model", str(bad), check=False)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and p.stderr.startswith("error: could not load model")


@pytest.mark.slow
def test_cli_bad_workload_names_the_field(tmp_path):
    wl = tmp_path / "w.json"
    wl.write_text(json.dumps({"name": "x", "slots": 4, "requests": [{"id": "a", "prompt": "hi", "max_new_tokens": 0}]}))
    p = cli("run", str(wl), "--backend", "sim", check=False)
    assert p.returncode == 2 and "requests[0].max_new_tokens" in p.stderr


@pytest.mark.model
def test_model_folder_prints_the_folder_whose_tokenizer_tools_load(smol):
    from transformers import AutoTokenizer
    folder = cli("model-folder").stdout.strip()
    tokenizer = AutoTokenizer.from_pretrained(folder)        # what aiperf, guidellm and lm-eval are given
    prompt = "The capital of France is"
    assert tokenizer.encode(prompt) == smol.tokenizer.encode(prompt)
    assert cli("model-folder", "--model", folder).stdout.strip() == folder   # a folder is its own


@pytest.mark.slow
def test_model_folder_of_a_missing_or_broken_model_is_one_clear_line(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file at all")
    for model, said in ((tmp_path / "nope", "error: model not found"), (bad, "error: could not convert")):
        p = cli("model-folder", "--model", str(model), check=False)
        assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and p.stderr.startswith(said), p.stderr
