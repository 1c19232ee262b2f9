"""The judge's layout (`judge.parallel`, the rules in judge_layout.py) for a real model and real GPUs.

The facts the rules need come from here: the model's config.json read by transformers and the
model built on the meta device (memory_plan: shapes, no weights loaded) for its weight bytes,
its tensor-parallel plan and its heads; the GPUs' sizes from nvidia-smi for the local inventory,
or `judge.gpu_memory` (SLURM, planning for other machines). Planning asks here (rules/common.smk,
`genjudge plan`), and so does the judge job when it starts.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import lru_cache

from genjudge.cluster import judge_layout
from genjudge.cluster.judge_layout import Layout, ModelFacts


def model_facts(spec, model=None) -> ModelFacts:
    """The judge model's facts, from `model` (on the meta device) or its config.json; InputError
    where the config cannot be read here (never downloads). Without `model`, they are remembered
    per machine (remembered_facts): planning reads them back without importing torch."""
    if model is None:
        return remembered_facts(spec)
    return _facts_of(spec, model)


def _facts_of(spec, model) -> ModelFacts:
    from genjudge.engine.memory_plan import weight_bytes

    config = model.config
    heads = getattr(config, "num_attention_heads", None)
    return ModelFacts(
        model_class=type(model).__name__,
        has_tp_plan=bool(model.supports_tp_plan),
        attention_heads=heads,
        kv_heads=getattr(config, "num_key_value_heads", None) or heads,
        weight_bytes=weight_bytes(model, spec.precision, spec.bnb_4bit_use_double_quant),
    )


# The facts' form, and how they are computed: a change to either stores them under new keys.
FACTS_VERSION = 1


def facts_key(spec) -> dict | None:
    """What a model's facts depend on: its config.json's bytes, the judge's precision and the
    installed transformers and accelerate (which build the model and size it; read from their
    metadata, nothing is imported). None where config.json is not found here (the facts are then
    computed, which raises where the config cannot be read)."""
    import hashlib

    from genjudge.engine.devices import installed
    from genjudge.models.modelref import config_path

    path = config_path(spec.model, spec.revision)
    if path is None:
        return None
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None

    return {
        "config_sha256": digest,
        "config_name": path.name,  # config.json, or a bare config file (its model_type inside)
        "precision": spec.precision,
        "double_quant": bool(spec.bnb_4bit_use_double_quant),
        "transformers": installed("transformers"),
        "accelerate": installed("accelerate"),
        "version": FACTS_VERSION,
    }


def remembered_facts(spec) -> ModelFacts:
    """model_facts() for `spec`'s model, remembered under machine_cache_dir()/model_facts/ by
    facts_key(): every Snakemake process that plans (a dry run, each cluster job's own) would
    otherwise import torch and transformers and build the model on the meta device, about 5 CPU-s
    before its first job starts (a 70B judge: about one more). A file that cannot be read or
    written is computed again."""
    import dataclasses

    from genjudge.engine.devices import machine_cache_dir
    from genjudge.store import atomic
    from genjudge.store.item_store import item_key

    key = facts_key(spec)
    path = machine_cache_dir() / "model_facts" / f"{item_key(**key)[:32]}.json" if key else None
    if path is not None and (stored := _stored_facts(path, key)) is not None:
        return stored
    from genjudge.engine.memory_plan import meta_model

    if key is None:
        return _facts_of(spec, meta_model(spec.model, spec.revision))
    # Built under the digest of the bytes just read (a process's model of an earlier version of a hub
    # snapshot's config is not reused), and stored only when the file still holds those bytes.
    facts = _facts_of(spec, meta_model(spec.model, spec.revision, ("sha256", key["config_sha256"])))
    if facts_key(spec) == key:
        try:
            atomic.write_json(path, {"key": key, "facts": dataclasses.asdict(facts)})
        except OSError:  # a read-only home: computed again next time
            pass
    return facts


_FACT_TYPES = {
    "model_class": (str,),
    "has_tp_plan": (bool,),
    "attention_heads": (int, type(None)),
    "kv_heads": (int, type(None)),
    "weight_bytes": (int,),
}


def _stored_facts(path, key: dict) -> ModelFacts | None:
    """The facts stored at `path` for `key`, or None where the file is missing, of another key, or not
    what this code writes (damaged, or edited by hand)."""
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    facts = stored.get("facts") if isinstance(stored, dict) and stored.get("key") == key else None
    if not isinstance(facts, dict) or set(facts) != set(_FACT_TYPES):
        return None
    for name, types in _FACT_TYPES.items():
        value = facts[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return None
    return ModelFacts(**facts)


def gpu_bytes_from_nvidia_smi(inventory: list) -> list[int] | None:
    """memory.total of each inventory GPU (by index), or None when nvidia-smi cannot tell."""
    exe = shutil.which("nvidia-smi")
    if not exe or not inventory:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    sizes = {}
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[1].replace(".", "", 1).isdigit():
            sizes[parts[0]] = int(float(parts[1]) * 1024**2)  # MiB
    found = [sizes.get(str(g)) for g in inventory]
    return None if any(s is None for s in found) else found


def job_gpus_for(spec, inventory: list, on_slurm: bool, n: int):
    """Hypothetical Gpu objects of one judge job (sizes known), or None."""
    from genjudge.engine.devices import Gpu
    from genjudge.engine.memory_plan import parse_inventory_spec

    if spec.gpu_memory:
        return parse_inventory_spec(f"{n}x{spec.gpu_memory}")
    if on_slurm:
        return None
    sizes = gpu_bytes_from_nvidia_smi(inventory[:n])
    return [Gpu(str(i), "nvidia-smi", s, s) for i, s in enumerate(sizes)] if sizes else None


def decide(spec, n: int, gpus=None, model=None) -> tuple[str, str]:
    """judge_layout.decide for this model (`model` on the meta device, else read when needed) and
    `gpus` (Gpu objects with their sizes; None: unknown)."""
    return judge_layout.decide(spec, n, lambda: model_facts(spec, model), gpus[0].total_bytes if gpus else None)


def layout(spec, slurm, inventory: list, on_slurm: bool, gpus=None, model=None) -> Layout:
    """The judge jobs and their GPUs. `slurm`: the config's `slurm` (job_resources.SlurmSettings); `gpus`:
    the GPUs of one job with their sizes, when the caller knows them (the plan's hypothetical inventory);
    else nvidia-smi or judge.gpu_memory."""
    if spec.engine == "openai":  # no model here, no GPU
        return judge_layout.layout(spec, 0, lambda: None)
    n = judge_layout.per_shard_gpus(spec, slurm, len(inventory), on_slurm)
    if gpus is not None:
        gpus = list(gpus)[:n] or None
    elif spec.parallel == "auto" and n > 1:
        gpus = job_gpus_for(spec, inventory, on_slurm, n)
    return judge_layout.layout(spec, n, lambda: model_facts(spec, model), gpus[0].total_bytes if gpus else None)


@lru_cache(maxsize=64)
def _cached(spec_json: str, slurm, inventory: tuple, on_slurm: bool) -> Layout:
    from genjudge.config.specs import JudgeSpec

    return layout(JudgeSpec.from_config(json.loads(spec_json)), slurm, list(inventory), on_slurm)


def cached_layout(spec, slurm, inventory: list, on_slurm: bool) -> Layout:
    """layout(), computed once per judge and setting (the rules ask for it many times)."""
    if spec.parallel in ("device_map", "replicas") or spec.engine == "openai":  # cheap: no model to look at
        return layout(spec, slurm, inventory, on_slurm)
    return _cached(
        json.dumps(spec.as_dict(), sort_keys=True, default=str),
        slurm,
        tuple(map(str, inventory)),
        on_slurm,
    )


def judge_gpus(spec, slurm, inventory: list, on_slurm: bool) -> int:
    """GPUs of one judge job. `all` is every GPU of the machine here (or of one judge node on SLURM),
    shared out among data-parallel judge shards; one each for `judge.parallel: replicas`."""
    return cached_layout(spec, slurm, inventory, on_slurm).gpus_per_job


def judge_jobs(spec, slurm, inventory: list, on_slurm: bool) -> int:
    """Judge jobs: `judge.shards`, times the GPUs of one for replicas."""
    return cached_layout(spec, slurm, inventory, on_slurm).jobs


def job_choice(spec, n: int) -> tuple[str, str]:
    """judge_layout.job_choice for the judge job's model and its `n` leased GPUs."""
    return judge_layout.job_choice(spec, n, lambda: model_facts(spec))


def check_parallel(specs) -> None:
    """Stop while planning when `judge.parallel: tensor` names a model that cannot be split."""
    for spec in specs:
        judge_layout.check_tensor_possible(spec, lambda spec=spec: model_facts(spec))


def check_vllm_layouts(models, slurm, inventory: list, on_slurm: bool) -> None:
    """Stop while planning where vLLM could not start on a job's GPUs: pipeline stages that outnumber
    the model's layers (its heads do not split over the GPUs), or an explicit `judge.parallel: tensor`
    whose tensor-parallel size does not divide the heads. `models`: the generators' and judges' on vLLM
    (genjudge.config.job_settings.vllm_models). Each error names the key."""
    from genjudge.errors import InputError
    from genjudge.models.vllm_support import local_config, pipeline_obstacle, tensor_obstacle

    for m in models:
        model_config = local_config(m.model, m.revision)
        if model_config is None:  # a hub model not in the cache: the job checks
            continue
        if m.kind == "judge":
            try:
                n = judge_gpus(m.judge, slurm, inventory, on_slurm)
            except InputError as exc:  # the layout's own refusal, with the key as the user wrote it
                why = str(exc).split("is impossible: ", 1)[-1]
                raise InputError(f"{m.parallel_key}: tensor is impossible: {why}") from None
        else:
            n = m.gpus_per_job
        why = pipeline_obstacle(model_config, n)
        if why:
            raise InputError(f"{m.gpus_key}: {n} GPUs per job of {m.model} with engine: vllm: {why}")
        split = tensor_obstacle(model_config, n) if n > 1 else None
        if m.kind == "judge" and m.judge.parallel == "tensor" and split:
            raise InputError(
                f"{m.parallel_key}: tensor with engine: vllm over {n} GPUs: {split}; "
                "use a GPU count that divides them, or parallel: auto (vLLM then splits the layers in stages)"
            )
