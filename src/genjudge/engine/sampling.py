"""Sampling whose randomness belongs to each sample, not to the batch.

`generate(do_sample=True)` draws every row's token from one global generator, so
a row's text depends on which rows share its batch. Here each row has its own
`torch.Generator`, seeded from the run's seed, the item's key and the sample
index, and the draw happens inside transformers' loop: `generate` runs greedy
(`do_sample=False`) with, after its own processors, the sampling warpers that
`do_sample=True` would have added (temperature, top-k, top-p, ... in the same
order) and last `PerRowSampler`. That processor draws one token per row by the
Gumbel-max trick over the processed scores (argmax of scores + Gumbel noise is an
exact sample from their softmax) and leaves only that token finite, so greedy
selection picks it. Each step, a row draws one uniform per token its warpers
kept (top-k, top-p), in token order, from its own generator; how many it draws
depends on its own scores only, so its tokens depend on its own prompt and seed
only: the same whatever the batch, shard, batch size, resume point or
out-of-memory backoff, given the same logits (same device type and dtype).
"""

from __future__ import annotations

import hashlib
import json

SEED_BITS = 63  # torch.Generator.manual_seed takes a non-negative 64-bit integer


def sample_seed(seed: int, key: str, sample: int) -> int:
    """The seed of one sample's generator: from the run's seed, the item's key and the sample index."""
    digest = hashlib.sha256(json.dumps([int(seed), key, int(sample)]).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << SEED_BITS) - 1)


def _resolved(generation_config, name: str):
    """A generation setting as `generate` resolves it: the model's value, else transformers' global default."""
    value = getattr(generation_config, name, None)
    if value is None:
        from transformers import GenerationConfig

        value = GenerationConfig._get_default_generation_params().get(name)
    return value


def sampling_settings(generation_config, temperature: float, top_p: float) -> dict:
    """What `generate(do_sample=True, temperature=..., top_p=...)` samples with: the configured
    temperature and top_p, and the model's other sampling settings (top_k, min_p, typical_p,
    epsilon/eta cutoffs, top_h) as `generate` would read them. Every engine samples with these."""
    gc = generation_config
    return {
        "temperature": temperature,
        "top_h": getattr(gc, "top_h", None),
        "top_k": _resolved(gc, "top_k"),
        "top_p": top_p,
        "min_p": getattr(gc, "min_p", None),
        "typical_p": _resolved(gc, "typical_p"),
        "epsilon_cutoff": _resolved(gc, "epsilon_cutoff"),
        "eta_cutoff": _resolved(gc, "eta_cutoff"),
    }


def sampling_warpers(generation_config, temperature: float, top_p: float) -> list:
    """The warpers `generate(do_sample=True, temperature=..., top_p=...)` adds after its processors,
    in its order (transformers' `_get_logits_processor`), from `sampling_settings`."""
    from transformers.generation import logits_process as lp

    s = sampling_settings(generation_config, temperature, top_p)
    out = []
    if s["temperature"] is not None and s["temperature"] != 1.0:
        out.append(lp.TemperatureLogitsWarper(s["temperature"]))
    if s["top_h"] is not None:
        out.append(lp.TopHLogitsWarper(top_h=s["top_h"]))
    if s["top_k"] is not None and s["top_k"] != 0:
        out.append(lp.TopKLogitsWarper(top_k=s["top_k"], min_tokens_to_keep=1))
    if s["top_p"] is not None and s["top_p"] < 1.0:
        out.append(lp.TopPLogitsWarper(top_p=s["top_p"], min_tokens_to_keep=1))
    if s["min_p"] is not None:
        out.append(lp.MinPLogitsWarper(min_p=s["min_p"], min_tokens_to_keep=1))
    if s["typical_p"] is not None and s["typical_p"] < 1.0:
        out.append(lp.TypicalLogitsWarper(mass=s["typical_p"], min_tokens_to_keep=1))
    if s["epsilon_cutoff"] is not None and 0.0 < s["epsilon_cutoff"] < 1.0:
        out.append(lp.EpsilonLogitsWarper(epsilon=s["epsilon_cutoff"], min_tokens_to_keep=1))
    if s["eta_cutoff"] is not None and 0.0 < s["eta_cutoff"] < 1.0:
        out.append(lp.EtaLogitsWarper(epsilon=s["eta_cutoff"], min_tokens_to_keep=1))
    return out


class PerRowSampler:
    """A logits processor (last in the list): row i's token drawn with generator i by Gumbel-max;
    the returned scores are 0 for that token and -inf elsewhere, so greedy selection takes it."""

    def __init__(self, seeds: list[int]):
        self.seeds = list(seeds)
        self.generators = None  # made on the first call, on the device the scores are on

    def __call__(self, input_ids, scores):
        import torch

        if scores.shape[0] != len(self.seeds):
            raise ValueError(f"{scores.shape[0]} rows of scores for {len(self.seeds)} seeds")
        if self.generators is None:
            self.generators = [torch.Generator(device=scores.device).manual_seed(s) for s in self.seeds]
        # Row i draws one uniform per token its warpers left (top-k/top-p), in token order, from its own
        # generator: how many depends on its own scores only, so its noise never depends on the batch.
        kept = scores != float("-inf")
        counts = kept.sum(dim=1).tolist()
        u = torch.cat(
            [
                torch.rand(n, generator=g, device=scores.device, dtype=torch.float32)
                for n, g in zip(counts, self.generators)
            ]
        )
        gumbel = u.log_().neg_().log_().neg_()  # -log(-log u); u == 0 gives -inf, never chosen
        # scores[kept] lists row 0's kept tokens in token order, then row 1's...: the order the draws were made in.
        race = torch.full(scores.shape, float("-inf"), dtype=torch.float32, device=scores.device)
        race.masked_scatter_(kept, gumbel.add_(scores[kept].float()))
        choice = race.argmax(dim=-1, keepdim=True)
        return race.fill_(float("-inf")).scatter_(1, choice, 0.0)


def seeded_sampling_kwargs(model, temperature: float, top_p: float, seeds: list[int]) -> dict:
    """`generate` keyword arguments that sample each row with its own seed (greedy loop, our processors)."""
    from transformers import LogitsProcessorList

    processors = [*sampling_warpers(model.generation_config, temperature, top_p), PerRowSampler(seeds)]
    return {
        "do_sample": False,
        "temperature": None,
        "top_p": None,
        "top_k": None,
        "logits_processor": LogitsProcessorList(processors),
    }
