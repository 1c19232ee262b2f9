"""Teach a small causal LM to complete prompts: the demo models and test judges.

A plain loop over (prompt as sent, completion) pairs with the loss on the
completion and its end-of-sequence token only. Single-threaded with a fixed
seed, so the same inputs give the same weights.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

log = logging.getLogger(__name__)


def finetune(
    model_dir,
    pairs: list[tuple[str, str]],
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    out_dir=None,
) -> dict:
    """Train on `pairs` and save to `out_dir` (default: in place). Returns the final loss."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # reduction order fixed: bit-for-bit reproducible weights
    try:
        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        model.train()
        encoded = []
        for prompt, completion in pairs:
            p = tok(prompt, add_special_tokens=False)["input_ids"]
            c = tok(completion, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            encoded.append((p + c, [-100] * len(p) + c))
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20) * max(0.05, 1 - s / steps))
        rng = random.Random(seed)
        loss_value = None
        for step in range(steps):
            batch = [encoded[rng.randrange(len(encoded))] for _ in range(batch_size)]
            width = max(len(ids) for ids, _ in batch)
            ids = torch.full((len(batch), width), tok.pad_token_id)
            labels = torch.full((len(batch), width), -100)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for i, (x, y) in enumerate(batch):  # right padding for training
                ids[i, : len(x)] = torch.tensor(x)
                labels[i, : len(y)] = torch.tensor(y)
                mask[i, : len(x)] = 1
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            loss_value = float(loss.detach())
            if step % 100 == 0 or step == steps - 1:
                log.info("step %d/%d loss %.4f", step + 1, steps, loss_value)
        model.eval()
        out = Path(out_dir or model_dir)
        model.save_pretrained(out)
        tok.save_pretrained(out)
        return {"loss": loss_value, "steps": steps}
    finally:
        torch.set_num_threads(threads)
