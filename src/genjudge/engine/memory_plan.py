"""Know before you run: parameters, weight and KV-cache memory, and the device map
accelerate would build, computed from config.json alone (empty weights, no download).
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from genjudge.cluster.judge_layout import ACTIVATION_RESERVE
from genjudge.cluster.judge_layout import size_text as _bytes
from genjudge.engine.devices import Gpu, cuda_gpus
from genjudge.engine.loading import device_name, device_of
from genjudge.errors import InputError

GIB = 1024**3
GB = 1000**3
BYTES = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0, "8bit": 1.0, "4bit": 0.5}
# bitsandbytes' quantization state per quantized weight. 4-bit: one absmax per block of 64 weights,
# fp32 (4/64 bytes), or with double quantization (bnb_4bit_use_double_quant, the default) 8-bit
# plus one fp32 absmax per 256 blocks (1/64 + 4/(64*256) bytes). 8-bit (LLM.int8): one fp32
# scale per output row, counted per Linear.
ABSMAX_4BIT = 4 / 64
ABSMAX_4BIT_DOUBLE = 1 / 64 + 4 / (64 * 256)
PRECISIONS = ["float32", "bfloat16", "8bit", "4bit"]


def parse_inventory_spec(spec: str) -> list[Gpu]:
    """`4x80GiB`, `2x24GB`, `80GiB` -> hypothetical GPUs of that size; `4xA100-80GB`, `8xH100`,
    `2xL40S` -> GPUs of a type the time model's table knows (its name and memory)."""
    m = re.fullmatch(r"\s*(?:(\d+)\s*[xX*]\s*)?(\d+(?:\.\d+)?)\s*(GiB|GB|G)?\s*", spec)
    if not m:
        from genjudge.planning.time_model import GPU_KEYS, gpu_type

        typed = re.fullmatch(r"\s*(?:(\d+)\s*[xX*]\s*)?(\S.*?)\s*", spec)
        device = gpu_type(typed.group(2)) if typed else None
        if device is None:
            raise InputError(
                f"GPU inventory {spec!r}: expected e.g. 4x80GiB, 2x24GB or a GPU type such as 4xA100-80GB "
                f"(known: {', '.join(GPU_KEYS)})"
            )
        size = int(device.memory_bytes)
        return [Gpu(str(i), device.name, size, size) for i in range(int(typed.group(1) or 1))]
    n = int(m.group(1) or 1)
    unit = GB if m.group(3) == "GB" else GIB
    size = int(float(m.group(2)) * unit)
    return [Gpu(str(i), f"hypothetical {m.group(2)}{m.group(3) or 'GiB'}", size, size) for i in range(n)]


def job_plan(spec, batch_size, seq_len: int, role: str) -> dict:
    """The plan for the GPUs this job can see, for its meta file; never fails the job."""
    from genjudge.engine import tensor_parallel

    if tensor_parallel.active():  # a device-map plan does not describe a tensor-parallel group
        return {"tensor_parallel_size": tensor_parallel.world_size(), "error": "no device-map plan in a torchrun group"}
    try:
        bs = batch_size if isinstance(batch_size, int) else 8
        return plan(spec, cuda_gpus(), bs, seq_len, role)
    except Exception as exc:  # noqa: BLE001 - a plan is advice, the load decides
        return {"error": f"{type(exc).__name__}: {exc}"}


def model_plan(spec, role: str) -> dict:
    """The model's numbers alone (what the time model reads), for the meta of a job whose engine
    places the model itself (vLLM): no placement, which would not be the engine's; never fails the job."""
    try:
        config = load_config(spec.model, spec.revision)
        model = meta_model(spec.model, spec.revision)
        precision = loaded_precision(spec, config)
        weights = {p: weight_bytes(model, p, spec.bnb_4bit_use_double_quant) for p in PRECISIONS}
        return {
            "role": role,
            "model": spec.model,
            **model_numbers(config, model, precision),
            "weights_bytes": weights,
            "precision": precision,
        }
    except Exception as exc:  # noqa: BLE001 - numbers for the time model, never a reason to stop
        return {"error": f"{type(exc).__name__}: {exc}"}


def _config_version(name: str):
    """What a local config.json is now (path, mtime, size): a cache key that changes with the file."""
    path = Path(os.path.expanduser(name))
    path = path / "config.json" if path.is_dir() else path
    try:
        st = path.stat()
    except OSError:
        return None  # a hub id: its snapshot is named by the revision
    return str(path.resolve()), st.st_mtime_ns, st.st_size


def load_config(name: str, revision: str | None = None):
    """The model's config from a local directory or the local Hugging Face cache; never downloads.
    Read once per version of the file in a process (callers only read it)."""
    return _load_config(name, revision, _config_version(name))


def meta_model(name: str, revision: str | None = None, version=None):
    """`empty_model(load_config(name, revision))`, built once per version of the config in a process
    (callers only read it): a plan weighs many options of one model, and building a 70B on the meta
    device takes about a CPU-second. `version`: what names that version where the caller knows (the
    digest of the config's bytes); else the local file's path, mtime and size (none for a hub id)."""
    return _meta_model(name, revision, version if version is not None else _config_version(name))


@functools.lru_cache(maxsize=16)
def _meta_model(name: str, revision: str | None, version):
    return empty_model(_load_config(name, revision, version))


@functools.lru_cache(maxsize=16)
def _load_config(name: str, revision: str | None, version):
    from transformers import AutoConfig

    path = Path(os.path.expanduser(name))
    if path.is_dir():
        if not (path / "config.json").exists():
            raise InputError(f"{name}: no config.json in this directory")
        return AutoConfig.from_pretrained(path)
    if path.suffix == ".json" and path.is_file():
        return AutoConfig.from_pretrained(path.parent) if path.name == "config.json" else _from_json(path)
    try:
        return AutoConfig.from_pretrained(name, revision=revision, local_files_only=True)
    except OSError:
        raise InputError(
            f"{name}: config.json is neither in a local directory nor in the local Hugging Face "
            f"cache (the plan never downloads; `hf download {name} config.json` fetches only the "
            f"config, `hf download {name}` the whole model)"
        ) from None


def _from_json(path: Path):
    from transformers import AutoConfig

    data = json.loads(path.read_text())
    return AutoConfig.for_model(data.pop("model_type"), **data)


def empty_model(model_config):
    """The model on the meta device: shapes without memory. `config` is left as it was (transformers
    sets the dtype it builds in on the config it is given: the checkpoint's own would read float32)."""
    import copy

    import torch
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM

    # fp32 shapes: accelerate sizes a parameter at min(target dtype, its own dtype).
    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(copy.deepcopy(model_config), dtype=torch.float32)
    model.tie_weights()  # tied input/output embeddings are one tensor, counted once
    return model


def _quantized_names(model) -> set[str]:
    """Parameters bitsandbytes quantizes: Linear weights except the output head."""
    import torch

    names = set()
    for mod_name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and not mod_name.endswith("lm_head"):
            names.add(f"{mod_name}.weight")
    return names


def dtype_plan(model, precision: str):
    """(dtype, special_dtypes) for accelerate's size computations at `precision`."""
    import torch
    from accelerate.utils import CustomDtype

    if precision in ("float32", "bfloat16", "float16"):
        return getattr(torch, precision), None
    quantized = _quantized_names(model)
    low = torch.int8 if precision == "8bit" else CustomDtype.INT4
    special = {n: torch.float16 for n, _ in model.named_parameters() if n not in quantized}
    return low, special


def weight_bytes(model, precision: str, double_quant: bool = True) -> int:
    """The weights' bytes at `precision` as bitsandbytes leaves them: quantized Linear weights with
    their quantization state, the embedding, output head and norms in 16 bits."""
    from accelerate.utils import compute_module_sizes

    dtype, special = dtype_plan(model, precision)
    size = compute_module_sizes(model, dtype=dtype, special_dtypes=special)[""]
    if precision == "4bit":
        size += quantized_parameters(model) * (ABSMAX_4BIT_DOUBLE if double_quant else ABSMAX_4BIT)
    elif precision == "8bit":
        size += 4 * sum(m.out_features for m in _quantized_linears(model))
    return int(size)


def _quantized_linears(model):
    import torch

    return [m for name, m in model.named_modules() if isinstance(m, torch.nn.Linear) and not name.endswith("lm_head")]


def quantized_parameters(model) -> int:
    """Parameters bitsandbytes would quantize (Linear weights but the output head)."""
    quantized = _quantized_names(model)
    return sum(p.numel() for n, p in model.named_parameters() if n in quantized)


def loaded_precision(spec, model_config) -> str:
    """The precision the job loads: spec.precision, where `dtype: auto` is the checkpoint's own
    dtype (config.json's `dtype`/`torch_dtype`; bfloat16 when it names none)."""
    if spec.quantization != "none" or spec.dtype != "auto":
        return spec.precision
    own = getattr(model_config, "dtype", None) or getattr(model_config, "torch_dtype", None)
    own = str(own).replace("torch.", "") if own is not None else ""
    return own if own in ("float32", "bfloat16", "float16") else "bfloat16"


def model_numbers(model_config, model, precision: str) -> dict:
    """What the time model needs of a model, as plain numbers (genjudge.planning.time_model uses them
    without torch). The KV cache is held in the compute dtype: fp32 for a float32 model."""
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "quantized_parameters": quantized_parameters(model),
        "layers": int(getattr(model_config, "num_hidden_layers", 0) or 0),
        "hidden_size": int(getattr(model_config, "hidden_size", 0) or 0),
        # attention heads per key/value head: grouped-query attention expands the KV cache by this
        "gqa_ratio": (getattr(model_config, "num_attention_heads", 1) or 1)
        // (getattr(model_config, "num_key_value_heads", None) or getattr(model_config, "num_attention_heads", 1) or 1),
        "kv_bytes_per_token": kv_cache_bytes(model_config, 1, 1, 4 if precision == "float32" else 2),
    }


def kv_cache_bytes(model_config, batch_size: int, seq_len: int, bytes_per_value: int = 2) -> int:
    layers = model_config.num_hidden_layers
    heads = getattr(model_config, "num_key_value_heads", None) or model_config.num_attention_heads
    head_dim = getattr(model_config, "head_dim", None) or model_config.hidden_size // model_config.num_attention_heads
    return int(2 * layers * heads * head_dim * seq_len * batch_size * bytes_per_value)


@dataclass
class Placement:
    device_map: dict
    per_device_params: dict
    per_device_layers: dict
    offloaded: list = field(default_factory=list)


def plan_device_map(
    model,
    gpus: list[Gpu],
    precision: str,
    strategy: str = "auto",
    max_memory: dict | None = None,
    cpu_bytes: int = 2**50,
) -> Placement:
    """The device map accelerate would build for this model on these GPUs."""
    from accelerate import infer_auto_device_map
    from accelerate.utils import get_balanced_memory

    dtype, special = dtype_plan(model, precision)
    no_split = list(getattr(model, "_no_split_modules", None) or [])
    if max_memory:
        mem = {(int(k) if str(k).isdigit() else k): v for k, v in max_memory.items()}
    else:
        mem = {i: int(g.total_bytes * (1 - ACTIVATION_RESERVE)) for i, g in enumerate(gpus)}
        mem["cpu"] = cpu_bytes
    if strategy in ("auto", "balanced", "balanced_low_0") and len(gpus) > 1:
        # transformers' `auto` is `balanced`: spread evenly rather than fill GPU 0 first.
        mem = get_balanced_memory(
            model,
            max_memory=mem,
            no_split_module_classes=no_split,
            dtype=dtype,
            special_dtypes=special,
            low_zero=strategy == "balanced_low_0",
        )
    device_map = infer_auto_device_map(
        model, max_memory=mem, no_split_module_classes=no_split, dtype=dtype, special_dtypes=special
    )
    params: Counter = Counter()
    for name, p in model.named_parameters():
        params[device_of(name, device_map)] += p.numel()
    # Decoder layers per device: one entry per layer, or one for a whole stack/model placed together.
    layers: Counter = Counter()
    layer_total = getattr(model.config, "num_hidden_layers", 0)
    for module, dev in device_map.items():
        if re.search(r"(^|\.)layers\.\d+$", module):
            layers[device_name(dev)] += 1
        elif module in ("", "model", "model.layers"):
            layers[device_name(dev)] += layer_total
    offloaded = sorted({device_name(d) for d in device_map.values() if device_name(d) in ("cpu", "disk")})
    return Placement(device_map, dict(params), dict(layers), offloaded)


def plan(spec, gpus: list[Gpu], batch_size: int, seq_len: int, role: str, model=None) -> dict:
    """Everything the plan prints for one model, as a dict (also written into job meta)."""
    import logging

    # accelerate warns "Device N is not available" for every hypothetical GPU.
    logging.getLogger("accelerate").setLevel(logging.ERROR)
    logging.getLogger("accelerate.utils.modeling").setLevel(logging.ERROR)
    config = load_config(spec.model, spec.revision)
    model = model if model is not None else meta_model(spec.model, spec.revision)
    precision = loaded_precision(spec, config)
    numbers = model_numbers(config, model, precision)
    weights = {p: weight_bytes(model, p, spec.bnb_4bit_use_double_quant) for p in PRECISIONS}
    kv = numbers["kv_bytes_per_token"] * batch_size * seq_len
    out = {
        "role": role,
        "model": spec.model,
        **numbers,
        "weights_bytes": weights,
        "precision": precision,
        "double_quant": bool(spec.bnb_4bit_use_double_quant) if precision == "4bit" else None,
        "kv_cache_bytes": kv,
        "batch_size": batch_size,
        "seq_len": seq_len,
        "gpus": [g.__dict__ for g in gpus],
    }
    if not gpus:
        out.update(fits=None, note="no GPUs: the model runs on the CPU")
        return out
    gpus = [g if isinstance(g, Gpu) else Gpu(**g) for g in gpus]
    placement = plan_device_map(model, gpus, precision, spec.device_map, spec.max_memory)
    total = sum(g.total_bytes for g in gpus)
    w = weights[precision] if precision in weights else weights["bfloat16"]
    headroom = total - w
    out.update(
        device_map_layers=placement.per_device_layers,
        device_map_params=placement.per_device_params,
        offloaded_to=placement.offloaded,
        fits=not placement.offloaded,
        headroom_bytes=headroom,
        kv_cache_fits=kv <= headroom * (1 - ACTIVATION_RESERVE),
    )
    per_sequence = kv / max(batch_size, 1)
    out["max_batch_for_kv"] = int(max(headroom * (1 - ACTIVATION_RESERVE), 0) // per_sequence) if per_sequence else None
    if precision in ("8bit", "4bit") and placement.offloaded:
        # bitsandbytes keeps no quantized layer on CPU or disk: from_pretrained refuses such a map
        # (or, with llm_int8_enable_fp32_cpu_offload, keeps those layers unquantized in fp32).
        out["quantized_offload"] = (
            f"{precision} weights of bitsandbytes cannot be offloaded to "
            f"{', '.join(placement.offloaded)}: the job would fail while loading"
        )
    if not out["fits"]:
        out["recommendation"] = recommend(weights, gpus, precision)
    elif not out["kv_cache_fits"]:
        out["recommendation"] = (
            f"the KV cache of batch {batch_size} does not fit beside the weights: "
            f"use batch_size <= {out['max_batch_for_kv']} (or batch_size: auto)"
        )
    return out


def refuse_quantized_offload(mplan: dict) -> None:
    """Stop before loading when the plan puts bitsandbytes layers on CPU or disk."""
    if mplan.get("quantized_offload"):
        raise InputError(
            f"{mplan['role']} {mplan['model']}: {mplan['quantized_offload']}; "
            f"{mplan.get('recommendation') or 'use more GPUs'}"
        )


def recommend(weights: dict, gpus: list[Gpu], precision: str) -> str:
    """The least lossy precision that fits these GPUs, else how many GPUs this precision needs."""
    import math

    usable = gpus[0].total_bytes * (1 - ACTIVATION_RESERVE)
    order = PRECISIONS[PRECISIONS.index(precision) + 1 :] if precision in PRECISIONS else PRECISIONS[1:]
    options = []
    for p in order:
        if weights[p] <= usable * len(gpus):
            options.append(f"quantization {p} (weights {_bytes(weights[p])}) on these {len(gpus)} GPU(s)")
            break
    w = weights.get(precision, weights["bfloat16"])
    options.append(f"{math.ceil(w / usable)} GPUs of this size at {precision}")
    return " or ".join(options)


def _count(n: float) -> str:
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.2f} {unit}"
    return str(int(n))


def render(p: dict) -> str:
    named = p.get("name") and p["name"] != Path(str(p["model"]).rstrip("/")).name
    lines = [
        f"{p['role']}: {p['model']}" + (f" (as {p['role']} {p['name']})" if named else ""),
        f"  parameters: {_count(p['parameters'])} ({p['parameters']:,})",
        "  weights: " + ", ".join(f"{k} {_bytes(v)}" for k, v in p["weights_bytes"].items()),
        f"  KV cache (batch {p['batch_size']} x {p['seq_len']} tokens): {_bytes(p['kv_cache_bytes'])}",
    ]
    if p.get("fits") is None:
        lines.append(f"  {p['note']}")
        return "\n".join(lines)
    lines.append(
        f"  at {p['precision']} on {len(p['gpus'])} GPU(s) of {p['gpus'][0]['total_bytes'] / GIB:.0f} GiB: "
        + ("weights FIT on the GPUs" if p["fits"] else "weights DO NOT FIT on the GPUs")
        + f"; left for activations and KV cache: {_bytes(p['headroom_bytes'])}"
        + ("" if p["kv_cache_fits"] else " (less than the KV cache needs)")
    )
    if p.get("engine") != "vllm":  # vLLM places the model itself: no accelerate device map
        lines.append(
            "  device map (layers): " + ", ".join(f"{d} {n}" for d, n in sorted(p["device_map_layers"].items()))
        )
        lines.append(
            "  device map (params): " + ", ".join(f"{d} {_count(n)}" for d, n in sorted(p["device_map_params"].items()))
        )
    if p.get("quantized_offload"):
        lines.append(f"  !!! ERROR: {p['quantized_offload']}")
    elif p["offloaded_to"]:
        lines.append(
            f"  !!! WARNING: layers would be offloaded to {', '.join(p['offloaded_to'])}: generation would crawl"
        )
    if p.get("recommendation"):
        lines.append(f"  recommendation: {p['recommendation']}")
    return "\n".join(lines)
