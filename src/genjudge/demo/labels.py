"""The demo's "human" labels: which of the demo generator's answers are right, known by construction.

The generator is taught the reference answer, except for a fixed quarter of the questions for
which it is taught a wrong answer of the same category (`training.generator_answers`). A person
grading its answers would mark exactly that quarter incorrect, so these labels stand in for human
judgments: `config/demo/labels.jsonl`, one `{"id", "label"}` per question.
"""

from __future__ import annotations

import json
from pathlib import Path

from genjudge.demo.training import _questions, generator_answers

LABELS = "config/demo/labels.jsonl"


def demo_labels(root: Path, seed: int = 0) -> list[dict]:
    questions = _questions(root)
    taught = generator_answers(questions, seed)
    return [{"id": q["id"], "label": "correct" if taught[q["id"]] == q["answer"] else "incorrect"} for q in questions]


def write_demo_labels(root: Path) -> Path:
    path = Path(root) / LABELS
    path.write_text("".join(json.dumps(r) + "\n" for r in demo_labels(Path(root))), encoding="utf-8")
    return path


if __name__ == "__main__":  # python -m genjudge.demo.labels: rewrite the committed file
    print(write_demo_labels(Path(__file__).resolve().parents[3]))
