"""The CUDA paths, on real GPUs: `pytest -m gpu` (skipped where torch sees no GPU).

No download: the demo models and models built here. Each CUDA check that depends on
CUDA_VISIBLE_DEVICES runs in a process of its own (the variable must be set before CUDA
starts), the way the workflow's jobs run.
"""

import json
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
import torch
from conftest import clean_env

from genjudge.cluster.gpu_lease import nvidia_smi_gpus

N_GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(N_GPUS == 0, reason="needs a CUDA GPU")]
two_gpus = pytest.mark.skipif(N_GPUS < 2, reason="needs 2 CUDA GPUs")

SMALL = {
    "generator": {"max_new_tokens": 8},
    "judge": {"max_new_tokens": 8},
    "resources": {"generate": {"cpus_per_gpu": 1}, "judge": {"cpus_per_gpu": 1}},
}


def small(**over) -> dict:
    """SMALL with `over` merged in, section by section."""
    out = {k: dict(v) for k, v in SMALL.items()}
    for key, value in over.items():
        out[key] = {**out.get(key, {}), **value} if isinstance(value, dict) and key in out else value
    return out


def one_gpu_env() -> dict:
    """The environment of a process that sees only the first GPU."""
    return clean_env(CUDA_VISIBLE_DEVICES=nvidia_smi_gpus()[0][0], CUDA_DEVICE_ORDER="PCI_BUS_ID")


def python(code: str, cwd=None, env=None, timeout=600) -> str:
    """Run `code` in a fresh interpreter; its stdout (it fails the test on a non-zero exit)."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc.stdout


def test_a_leased_process_sees_exactly_its_device(tmp_path):
    table = nvidia_smi_gpus()
    assert table, "nvidia-smi lists no GPU although torch sees one"
    for index, uuid in table[: min(len(table), 4)]:
        out = python(
            f"""
            import json
            from genjudge.cluster.gpu_lease import acquire
            with acquire(1, [{index!r}], {str(tmp_path)!r}, label="gpu-test", slurm_executor=False) as lease:
                import torch
                props = torch.cuda.get_device_properties(0)
                print(json.dumps({{"count": torch.cuda.device_count(), "uuid": str(props.uuid),
                                  "devices": lease.devices}}))
            """
        )
        seen = json.loads(out.strip().splitlines()[-1])
        # torch prints the UUID without nvidia-smi's "GPU-" prefix
        assert seen["uuid"].lower().removeprefix("gpu-") == uuid.lower().removeprefix("gpu-"), (seen, uuid)
        assert seen["count"] == 1 and seen["devices"] == [index]


def test_bitsandbytes_8bit_and_4bit_load_and_judge_on_the_gpu(workflow):
    out = python(
        """
        import json, torch, bitsandbytes as bnb
        from genjudge.engine.loading import load_causal_lm
        from genjudge.config.specs import spec_for
        seen = {}
        for q in ("8bit", "4bit"):
            model, placement = load_causal_lm(spec_for("judge", model="models/demo-judge", quantization=q))
            kinds = {type(m).__name__ for m in model.modules() if isinstance(m, (bnb.nn.Linear8bitLt, bnb.nn.Linear4bit))}
            seen[q] = {"kinds": sorted(kinds), "placement": placement}
        print(json.dumps(seen))
        """,
        cwd=workflow.path,
        env=one_gpu_env(),
    )
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["8bit"]["kinds"] == ["Linear8bitLt"] and seen["4bit"]["kinds"] == ["Linear4bit"]
    assert all(set(s["placement"]) == {"cuda:0"} for s in seen.values())

    judges = {"q8": {"quantization": "8bit", "gpus": 1}, "q4": {"quantization": "4bit", "gpus": 1}}
    cfg = workflow.write_config(**small(gpu_inventory="auto", shards=1, judges=judges))
    workflow.run("--cores", "2", "--resources", "gpu=1", "--configfile", cfg)
    for name, q in (("q8", "8bit"), ("q4", "4bit")):
        meta = json.loads((workflow.results() / "judge" / name / "raw.meta.json").read_text())
        assert meta["quantization"] == q and meta["computed_items"] > 0
        assert set(meta["placement"]) == {"cuda:0"}
        raw = pd.read_parquet(workflow.results() / "judge" / name / "raw.parquet")
        assert raw["judge_output"].notna().all() and len(raw) == meta["n_requests"]


OOM_SCRIPT = """
import json, sys, torch
from genjudge.engine.completion import PromptSet, complete
from genjudge.store.item_store import ItemStore, count_keys
from genjudge.config.specs import spec_for

# A real out-of-memory error on a small model: cap this process's share of the GPU (prompts of
# about 220 to 500 tokens, 48 new: a batch of 1024 needs far more than the cap, a batch of 1 far less).
cap = {cap}
torch.cuda.set_per_process_memory_fraction(cap / torch.cuda.get_device_properties(0).total_memory)
spec = spec_for("judge", model="models/demo-judge", batch_size={batch_size}, max_new_tokens=48)
pset = PromptSet(spec, kind="judge")
texts = [("question %d: " % i) + "how many apples are there in the basket? " * (10 + i % 10) for i in range({n})]
ids = ["q%d" % i for i in range({n})]
store = ItemStore("{store}", "oom-test")
ooms = []
from genjudge.engine import decoding
real = decoding.is_oom
def counting(exc):
    hit = real(exc)
    ooms.append(hit)
    return hit
decoding.is_oom = counting
import genjudge.engine.batch_size as bsmod
bsmod.is_oom = counting
c = complete(pset, texts, ids, store, "oom", sys.stderr)
print(json.dumps({{"batch_size": c.batch_size, "n": len(c.results), "outputs": sum(r["output"] is not None
    for r in c.results), "stored": count_keys("{store}"), "ooms": sum(ooms)}}))
"""


@pytest.mark.parametrize("batch_size", ["auto", 1024])
def test_batch_size_meets_a_real_out_of_memory_error_and_loses_no_item(workflow, tmp_path, batch_size):
    n = 600
    code = OOM_SCRIPT.format(cap=96 * 2**20, batch_size=repr(batch_size), n=n, store=tmp_path / f"store-{batch_size}")
    seen = json.loads(python(code, cwd=workflow.path, env=one_gpu_env()).strip().splitlines()[-1])
    assert seen["ooms"] >= 1, "the memory cap never produced an out-of-memory error"
    assert 1 <= seen["batch_size"] < 1024
    assert seen["n"] == seen["outputs"] == seen["stored"] == n


@two_gpus
def test_generator_spread_over_two_gpus_with_device_map(workflow):
    # 300 KB on GPU 0 holds the embedding (and the tied output head), the decoder layers go to GPU 1:
    # the inputs start on GPU 0, the hidden states cross to GPU 1 and back.
    spread = {"gpus_per_job": 2, "device_map": "sequential", "max_memory": {"0": "300KB", "1": "2GB"}}
    cfg = workflow.write_config(**small(gpu_inventory="auto", shards=1, generator=spread))
    workflow.run("--cores", "2", "--resources", "gpu=2", "--configfile", cfg, "--until", "merge")
    meta = workflow.metas()[0]
    assert len(meta["gpus"]) == 2 and set(meta["placement"]) == {"cuda:0", "cuda:1"}, meta["placement"]
    one = workflow.write_config(
        "one.yaml", **small(run="one", cache_dir="results/.one", gpu_inventory="auto", shards=1)
    )
    workflow.run("--cores", "2", "--resources", "gpu=1", "--configfile", one, "--until", "merge")
    got = workflow.results() / "generations" / "demo-generator"
    want = workflow.results("one") / "generations" / "demo-generator"
    for path in got.glob("*.parquet"):
        a, b = pd.read_parquet(path), pd.read_parquet(want / path.name)
        assert a["output"].tolist() == b["output"].tolist()


@two_gpus
def test_tensor_parallel_judge_over_two_gpus_matches_one_gpu(workflow):
    cfg = workflow.write_config(**small(gpu_inventory="auto", shards=1, judge={"parallel": "tensor", "gpus": 2}))
    workflow.run("--cores", "2", "--resources", "gpu=2", "--configfile", cfg)
    meta = json.loads((workflow.results() / "judge" / "demo-judge" / "raw.meta.json").read_text())
    assert meta["parallel"] == "tensor" and meta["tensor_parallel_size"] == 2 and len(meta["gpus"]) == 2
    log = (workflow.path / "logs" / "demo" / "judge" / "demo-judge" / "0-of-1.log").read_text()
    assert "backend nccl" in log
    one = workflow.write_config(
        "one.yaml",
        **small(
            run="one",
            cache_dir="results/.one",
            gpu_inventory="auto",
            shards=1,
            judge={"parallel": "device_map", "gpus": 1},
        ),
    )
    workflow.run("--cores", "2", "--resources", "gpu=1", "--configfile", one)
    keys = ["generator", "dataset", "id", "order"]
    a = pd.read_parquet(workflow.results() / "judge" / "demo-judge" / "raw.parquet").sort_values(keys)
    b = pd.read_parquet(workflow.results("one") / "judge" / "demo-judge" / "raw.parquet").sort_values(keys)
    assert a["judge_output"].tolist() == b["judge_output"].tolist()


def test_one_gpu_end_to_end_demo_run(workflow):
    first = nvidia_smi_gpus()[0][0]
    cfg = workflow.write_config(gpu_inventory="auto")
    workflow.run("--cores", "2", "--resources", "gpu=1", "--configfile", cfg, env=clean_env(CUDA_VISIBLE_DEVICES=first))
    for meta in workflow.metas():
        assert meta["gpus"] == [first] and set(meta["placement"]) == {"cuda:0"}
        assert meta["device"]["cuda_available"] and len(meta["device"]["devices"]) == 1
    judge = json.loads((workflow.results() / "judge" / "demo-judge" / "raw.meta.json").read_text())
    assert judge["gpus"] == [first] and set(judge["placement"]) == {"cuda:0"}
    summary = json.loads((workflow.results() / "report" / "summary.json").read_text())
    assert summary and (workflow.results() / "report" / "report.md").exists()


def test_vllm_on_one_gpu_answers_as_transformers_does_in_fp32(workflow):
    pytest.importorskip("vllm", reason="engine: vllm needs vLLM (make setup ENGINE=vllm)")
    fp32 = {"dtype": "float32", "max_new_tokens": 8}
    vllm = {**fp32, "engine": "vllm", "vllm": {"gpu_memory_utilization": 0.3, "enforce_eager": True}}
    cfg = workflow.write_config(**small(gpu_inventory="auto", shards=1, generator=vllm, judge=vllm))
    workflow.run("--cores", "2", "--resources", "gpu=1", "--configfile", cfg)
    meta = workflow.metas()[0]
    assert meta["engine"] == "vllm" and meta["device"]["platform"] == "cuda" and len(meta["gpus"]) == 1
    hf = workflow.write_config(
        "hf.yaml",
        **small(run="hf", cache_dir="results/.hf", gpu_inventory="auto", shards=1, generator=fp32, judge=fp32),
    )
    workflow.run("--cores", "2", "--resources", "gpu=1", "--configfile", hf)
    for part in ("generations/demo-generator/questions.parquet", "judge/demo-judge/raw.parquet"):
        a, b = pd.read_parquet(workflow.results() / part), pd.read_parquet(workflow.results("hf") / part)
        column = "output" if part.startswith("generations") else "judge_output"
        assert a[column].tolist() == b[column].tolist(), part


@two_gpus
def test_vllm_judge_over_two_gpus_with_tensor_parallelism(workflow):
    pytest.importorskip("vllm", reason="engine: vllm needs vLLM (make setup ENGINE=vllm)")
    judge = {"engine": "vllm", "parallel": "tensor", "gpus": 2, "vllm": {"gpu_memory_utilization": 0.3}}
    cfg = workflow.write_config(**small(gpu_inventory="auto", shards=1, judge=judge))
    workflow.run("--cores", "2", "--resources", "gpu=2", "--configfile", cfg)
    meta = json.loads((workflow.results() / "judge" / "demo-judge" / "raw.meta.json").read_text())
    assert meta["engine_settings"]["tensor_parallel_size"] == 2 and len(meta["gpus"]) == 2
