"""What decides a rerun: outputs' real inputs, not the machine's GPU list."""

import json
import os
import re
import shutil

import pytest
from conftest import clean_env, planned_jobs

pytestmark = pytest.mark.workflow


def pad_weights(weights, mib=65):
    """The model's safetensors file made larger than 64 MiB with an extra tensor (left unused by
    transformers, which reports it as unexpected): files that large once entered the fingerprint
    by their size and their first and last MiB only."""
    import torch
    from safetensors.torch import load_file, save_file

    tensors = load_file(weights)
    tensors["padding"] = torch.zeros(mib * 1024 * 1024 // 4, dtype=torch.float32)
    save_file(tensors, weights, metadata={"format": "pt"})
    assert weights.stat().st_size > 64 * 1024 * 1024


def flip_middle_byte(path):
    """One byte in the middle of the file changed in place, size and mtime kept (as `cp -p` leaves them)."""
    st = os.stat(path)
    with open(path, "r+b") as fh:
        fh.seek(st.st_size // 2)
        byte = fh.read(1)[0]
        fh.seek(st.st_size // 2)
        fh.write(bytes([byte ^ 0xFF]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_gpu_list_does_not_rerun_and_changed_weights_do(workflow):
    shutil.copytree(workflow.path / "models" / "demo-generator", workflow.path / "models" / "gen-copy")
    weights = workflow.path / "models" / "gen-copy" / "model.safetensors"
    pad_weights(weights)
    cfg = workflow.write_config(
        "r.yaml",
        run="r",
        shards=2,
        gpu_inventory=[0, 1],
        generator={"model": "models/gen-copy", "max_new_tokens": 6},
        judge={"max_new_tokens": 6},
        resources={"generate": {"cpus_per_gpu": 1}, "judge": {"cpus_per_gpu": 1}},
    )
    workflow.run("--cores", "2", "--resources", "gpu=2", "--configfile", cfg)
    # Another CUDA_VISIBLE_DEVICES narrows the inventory; finished jobs stay finished.
    out = workflow.run("-n", "--configfile", cfg, env=clean_env(CUDA_VISIBLE_DEVICES="1"))
    assert "Nothing to be done" in out.stdout + out.stderr
    # The large file's digest was kept beside the item cache: planning does not read it again.
    assert len([p for p in (workflow.path / "results" / ".cache" / "file-digests").rglob("*") if p.is_symlink()]) == 1
    # One byte overwritten in the middle of the weights, same size and mtime: every job that used them runs again.
    flip_middle_byte(weights)
    dry = workflow.run("-n", "--configfile", cfg)
    jobs = planned_jobs(dry)
    assert jobs["generate"] == "2" and jobs["judge"] == "1"
    # Each job's reason is one line naming the setting that changed, not its whole parameter dictionary.
    dry = dry.stdout
    reasons = re.findall(r"^rule generate:\n(?:\s+\w+: .*\n)*?\s+reason: (.*)$", dry, re.M)
    assert len(reasons) == 2, dry[-3000:]
    for reason in reasons:
        assert re.fullmatch(
            r"Params have changed since last execution: Union of exclusive params before and now across all "
            r"output: before: 'model_fingerprint=\w+' now: 'model_fingerprint=\w+' ",
            reason,
        ), reason


def test_merge_refuses_shards_of_different_model_files(tmp_path):
    import pandas as pd

    from genjudge.stages.merge import MergeError, run_merge
    from genjudge.store.records import GenerateMeta

    items = pd.DataFrame({"id": ["a", "b"], "prompt": "q", "reference": "r", "category": None})
    items.to_parquet(tmp_path / "items.parquet")
    paths, metas = [], []
    for i, (item, fp) in enumerate([("a", "f1"), ("b", "f2")]):
        pd.DataFrame({"id": [item], "output": ["o"]}).to_parquet(tmp_path / f"{i}.parquet")
        GenerateMeta(shard=i, model_fingerprint=fp, started_at=0, finished_at=1).write(tmp_path / f"{i}.meta.json")
        paths.append(tmp_path / f"{i}.parquet")
        metas.append(tmp_path / f"{i}.meta.json")
    with pytest.raises(MergeError, match=r"different model files \(f1: shard\(s\) \[0\]; f2: shard\(s\) \[1\]\)"):
        run_merge(tmp_path / "items.parquet", paths, tmp_path / "out.parquet", metas)
    assert not os.path.exists(tmp_path / "out.parquet")
    json.loads((tmp_path / "0.meta.json").read_text())  # inputs untouched
