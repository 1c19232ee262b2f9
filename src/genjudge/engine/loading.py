"""Load tokenizers and causal LMs: dtype, device_map over the job's GPUs, bitsandbytes.

The CPU path is the same code: with no CUDA device, accelerate's device map
puts every module on the CPU.
"""

from __future__ import annotations

import logging
from collections import Counter

log = logging.getLogger(__name__)

_DTYPES = {
    "float16": "float16",
    "fp16": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float32": "float32",
    "fp32": "float32",
}


def _torch_dtype(name: str):
    import torch

    if name == "auto":
        return "auto"
    return getattr(torch, _DTYPES[name])


def load_tokenizer(name: str, revision: str | None = None):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name, revision=revision)
    tok.padding_side = "left"  # decoder-only batching: prompts end where generation starts
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def quantization_config(spec):
    """A BitsAndBytesConfig for `quantization: 8bit|4bit`, or None."""
    quant = spec.quantization
    if quant == "none":
        return None
    from transformers import BitsAndBytesConfig

    if quant == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    if quant == "4bit":
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type=spec.bnb_4bit_quant_type,
            bnb_4bit_use_double_quant=bool(spec.bnb_4bit_use_double_quant),
            bnb_4bit_compute_dtype=_torch_dtype(spec.bnb_4bit_compute_dtype),
        )
    raise ValueError(f"unknown quantization {quant!r}")


def load_causal_lm(spec):
    """Load `spec.model` (a ModelSpec) spread over the visible GPUs (or the CPU).

    Returns (model, placement) where placement maps device -> parameter count.
    """
    import torch
    from transformers import AutoModelForCausalLM

    kwargs = {"revision": spec.revision, "dtype": _torch_dtype(spec.dtype)}
    quant = quantization_config(spec)
    if quant is not None:
        kwargs["quantization_config"] = quant
    if torch.cuda.is_available():
        kwargs["device_map"] = spec.device_map
        if spec.max_memory:
            kwargs["max_memory"] = {(int(k) if str(k).isdigit() else k): v for k, v in spec.max_memory.items()}
        if spec.offload_folder:
            kwargs["offload_folder"] = spec.offload_folder
    else:
        kwargs["device_map"] = {"": "cpu"}
    from genjudge.engine import tensor_parallel

    if tensor_parallel.active():  # one rank of a torchrun group: this rank's slice of every weight
        kwargs = tensor_parallel.load_kwargs(kwargs)
    model = AutoModelForCausalLM.from_pretrained(spec.model, **kwargs)
    model.eval()
    placement = parameter_placement(model)
    for device, count in placement.items():
        log.info("parameters on %s: %d", device, count)
    off = {d: c for d, c in placement.items() if d in ("cpu", "disk") or d.startswith("meta")}
    if torch.cuda.is_available() and off:
        log.warning(
            "!!! %s parameters were offloaded to %s: generation will be slow. "
            "Use more GPUs, 8-bit/4-bit quantization or a smaller model.",
            sum(off.values()),
            ", ".join(off),
        )
    return model, placement


def device_name(device) -> str:
    """accelerate's device-map values (0, "cpu", "disk", torch.device) as strings; GPUs as cuda:N."""
    device = str(device)
    return f"cuda:{device}" if device.isdigit() else device


def device_of(param_name: str, device_map: dict, default="cpu") -> str:
    """The device a device map assigns to a parameter: its longest matching module prefix."""
    best, device = -1, default
    for module, dev in device_map.items():
        if (module == "" or param_name == module or param_name.startswith(module + ".")) and len(module) > best:
            best, device = len(module), dev
    return device_name(device)


def parameter_placement(model) -> dict[str, int]:
    """Parameters per device, from accelerate's hf_device_map when there is one."""
    device_map = getattr(model, "hf_device_map", None) or {}
    counts: Counter = Counter()
    for name, param in model.named_parameters():
        counts[device_of(name, device_map, default=param.device)] += param.numel()
    return dict(counts)


def input_device(model):
    """Where input ids must go: the device of the embedding layer."""
    return model.get_input_embeddings().weight.device
