"""Logprob verdicts: one forward pass per prompt, no decoding, never unparsed.

The judge prompt is followed by the grading mode's verdict marker ("VERDICT:")
and the model's next-token distribution is read at that position. Each of the
mode's labels is represented by the first token of its continuation
(" CORRECT", " INCORRECT"); labels whose
first tokens collide under the judge's tokenizer cannot be told apart this way,
so that is refused at load time.
"""

from __future__ import annotations

from genjudge.errors import InputError


def label_token_ids(tokenizer, labels: tuple[str, ...], marker: str) -> list[int]:
    """The first token of each label's continuation after `marker`; colliding labels are refused."""
    prefix = tokenizer(marker, add_special_tokens=False)["input_ids"]
    ids = []
    for label in labels:
        full = tokenizer(f"{marker} {label}", add_special_tokens=False)["input_ids"]
        if full[: len(prefix)] != prefix or len(full) <= len(prefix):
            raise InputError(f"judge tokenizer: {marker!r} does not tokenize as a prefix of {marker + ' ' + label!r}")
        ids.append(full[len(prefix)])
    if len(set(ids)) != len(ids):
        pieces = [tokenizer.convert_ids_to_tokens(i) for i in ids]
        raise InputError(
            f"judge tokenizer: the verdict labels {list(labels)} start with the same token(s) "
            f"{pieces}; logprob verdicts cannot tell them apart; use verdict: generate"
        )
    return ids


class LogprobScorer:
    """Same interface as generation.Generator: token_lengths, generate (one batch), probe."""

    def __init__(self, model, tokenizer, add_special_tokens: bool, labels: tuple[str, ...], marker: str):
        self.model = model
        self.tok = tokenizer
        self.add_special_tokens = add_special_tokens
        self.labels = labels
        self.marker = marker
        self.ids = label_token_ids(tokenizer, labels, marker)

    def token_lengths(self, prompts: list[str]) -> list[int]:
        from genjudge.engine.decoding import token_lengths

        return token_lengths(self.tok, prompts, self.add_special_tokens)

    def _forward(self, prompts):
        import torch

        from genjudge.engine.loading import input_device

        enc = self.tok(prompts, return_tensors="pt", padding=True, add_special_tokens=self.add_special_tokens)
        enc = {k: v.to(input_device(self.model)) for k, v in enc.items()}
        with torch.inference_mode():
            # Only the last position's logits are needed: skip the output head elsewhere.
            logits = self.model(**enc, logits_to_keep=1).logits[:, -1, :].float()
        return enc, logits

    def generate(self, prompts: list[str]) -> list[dict]:
        import torch

        enc, logits = self._forward(prompts)
        probs = torch.softmax(logits[:, self.ids], dim=-1)
        out = []
        for row, n_prompt in zip(probs.tolist(), enc["attention_mask"].sum(dim=1).tolist()):
            label = self.labels[max(range(len(self.labels)), key=lambda i: row[i])]
            # p_correct: the probability of the first (positive) label among the labels.
            out.append(
                {
                    "output": f"{self.marker} {label}",
                    "p_correct": row[0],
                    "n_prompt_tokens": int(n_prompt),
                    "n_generated_tokens": 0,
                    "finish_reason": "logprob",
                }
            )
        return out

    def probe(self, prompt: str, batch_size: int, steps: int = 0):
        """One forward pass of `batch_size` copies of `prompt`, timed (batch_size.run_probe)."""
        from genjudge.engine.decoding import StepClock

        clock = StepClock()
        clock.start()
        enc, logits = self._forward([prompt] * batch_size)
        logits.cpu()  # wait for the device
        clock.end()
        return clock, enc["input_ids"].shape[1]
