"""The demo's two small models, trained on CPU from a fixed seed.

- Generator: learns the demo questions' answers, except for a fixed quarter of
  them (picked by the seed) for which it learns a wrong answer of the same
  category: its accuracy is about 75% by construction, so the judge has real
  right and wrong answers to grade.
- Judge: learns the `reference` grading mode on the demo judge template from
  synthetic (question, reference, candidate) triples, half of them matching,
  the rest with a candidate drawn from the other answers; it answers
  `VERDICT: CORRECT` or `VERDICT: INCORRECT`.

Training is single-threaded, so `genjudge train-demo` rebuilds the committed
checkpoints bit for bit (same torch build).
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

from genjudge.demo.finetune import finetune
from genjudge.demo.models import build_model
from genjudge.engine.loading import load_tokenizer
from genjudge.engine.prompting import render_prompt
from genjudge.judging import modes
from genjudge.judging.templates import load_template, render

WRONG_FRACTION = 0.25
GENERATOR_STEPS = 500
JUDGE_STEPS = 4000
JUDGE_EXAMPLES = 3000


def _questions(root: Path) -> list[dict]:
    return [json.loads(line) for line in open(root / "config/demo/questions.jsonl", encoding="utf-8")]


def _corpus(root: Path) -> list[Path]:
    return [
        root / "config/demo/questions.jsonl",
        root / "config/templates/reference.txt",
        root / "config/demo/judge_template.txt",
    ]


def generator_answers(questions: list[dict], seed: int = 0) -> dict[str, str]:
    """What the generator is taught: the reference, or for a fixed quarter a wrong answer."""
    rng = random.Random(seed)
    by_cat: dict[str, list[str]] = {}
    for q in questions:
        by_cat.setdefault(q["category"], []).append(q["answer"])
    wrong = set(rng.sample([q["id"] for q in questions], round(WRONG_FRACTION * len(questions))))
    answers = {}
    for q in questions:
        if q["id"] in wrong:
            answers[q["id"]] = rng.choice([a for a in by_cat[q["category"]] if a != q["answer"]])
        else:
            answers[q["id"]] = q["answer"]
    return answers


def _train(out_dir, root: Path, seed: int, make_pairs, steps: int, batch_size: int) -> dict:
    """Build a fresh model beside `out_dir`, teach it `make_pairs(questions, tok)`, rename it into place."""
    questions = _questions(root)
    tmp = Path(out_dir).with_name(f".{Path(out_dir).name}.training")
    shutil.rmtree(tmp, ignore_errors=True)
    build_model(tmp, _corpus(root), seed=seed)
    tok = load_tokenizer(str(tmp))
    stats = finetune(str(tmp), make_pairs(questions, tok), steps=steps, batch_size=batch_size, lr=3e-3, seed=seed)
    tmp.rename(out_dir)
    return stats


def train_generator(out_dir, root: Path, seed: int = 0) -> dict:
    def pairs(questions, tok):
        taught = generator_answers(questions, seed)
        return [(render_prompt(tok, q["question"]), taught[q["id"]]) for q in questions]

    return _train(out_dir, root, seed, pairs, GENERATOR_STEPS, 16)


def judge_examples(questions: list[dict], tok, template: str, n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    answers = sorted({q["answer"] for q in questions})
    pairs = []
    for _ in range(n):
        q = rng.choice(questions)
        right = rng.random() < 0.5
        cand = q["answer"] if right else rng.choice([a for a in answers if a != q["answer"]])
        text = render(template, question=q["question"], reference=q["answer"], candidate=cand)
        pairs.append((render_prompt(tok, text), "VERDICT: CORRECT" if right else "VERDICT: INCORRECT"))
    return pairs


def train_judge(out_dir, root: Path, seed: int = 1) -> dict:
    template = load_template(root / "config/demo/judge_template.txt", modes.get("reference"))
    return _train(
        out_dir, root, seed, lambda qs, tok: judge_examples(qs, tok, template, JUDGE_EXAMPLES, seed), JUDGE_STEPS, 32
    )


def train(name: str, out_dir, root: Path) -> dict:
    if Path(out_dir).exists():
        raise FileExistsError(f"{out_dir} exists; remove it to retrain")
    if name.endswith("judge"):
        return train_judge(out_dir, root)
    return train_generator(out_dir, root)
