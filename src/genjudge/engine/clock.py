"""The step clock of a `generate` call: when its prefill ended and each decoding step after it."""

from __future__ import annotations

import time


class StepClock:
    """Times one `generate` call as a stopping criterion: `start` before the prefill, a mark each time
    transformers checks whether to stop (after every new token), `end` after the last step. It reads
    nothing of the tokens, so it adds no copy to the host (a streamer's `.cpu()` every step would).
    With `stop_after`, it stops every sequence after that many new tokens (the batch-size probes)."""

    def __init__(self, stop_after: int | None = None):
        self.marks: list[float] = []
        self.stop_after = stop_after
        self._answer = None

    def start(self) -> None:
        self.marks = [time.perf_counter()]

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        self.marks.append(time.perf_counter())
        stop = self.stop_after is not None and len(self.marks) - 1 >= self.stop_after
        if self._answer is None or self._answer[0] != stop or self._answer[1].shape[0] != input_ids.shape[0]:
            value = torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)
            self._answer = (stop, value)
        return self._answer[1]

    def end(self) -> None:
        self.marks.append(time.perf_counter())

    def step_seconds(self) -> list[float]:
        """Seconds of each decoding step after the first new token."""
        m = self.marks[1:-1]
        return [b - a for a, b in zip(m, m[1:])]
