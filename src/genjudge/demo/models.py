"""Small Llama-architecture checkpoints for the demo and the tests, built offline.

A byte-level BPE tokenizer is trained on local text, wrapped as a
PreTrainedTokenizerFast with a chat template, and a LlamaForCausalLM is
initialised from a fixed seed. Both are saved with save_pretrained, so loading
goes through exactly the code path of a real model. Same inputs, same bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL = ["<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>"]

SIZES = {
    # Heads of 32: the smallest size vLLM's CPU attention runs, so the demo runs on either engine.
    "tiny": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2
    ),
    "small": dict(
        hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4
    ),
}


def corpus_lines(paths) -> list[str]:
    lines = []
    for p in paths:
        lines.extend(Path(p).read_text(encoding="utf-8").splitlines())
    return lines or ["hello world"]


def build_tokenizer(lines: list[str], vocab_size: int = 512):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(lines, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=SPECIAL[3:],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(out_dir, corpus_paths, seed: int = 0, size="tiny", vocab_size: int = 512) -> Path:
    """Build tokenizer + randomly initialised Llama into `out_dir` (atomically). `size`: a name of
    SIZES or a dict of LlamaConfig dimensions."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out_dir = Path(out_dir)
    if out_dir.exists():
        raise FileExistsError(f"{out_dir} already exists")
    tok = build_tokenizer(corpus_lines(corpus_paths), vocab_size)
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        **(SIZES[size] if isinstance(size, str) else size),
    )
    model = LlamaForCausalLM(cfg)
    # Built beside the target and renamed into place: a half-built model is never seen.
    tmp = out_dir.with_name(f".{out_dir.name}.tmp{os.getpid()}")
    tok.save_pretrained(tmp)
    model.save_pretrained(tmp)
    os.replace(tmp, out_dir)
    return out_dir
