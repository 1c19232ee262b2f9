"""The committed demo checkpoints: rebuilt bit for bit by the training code."""

import hashlib
import json
from pathlib import Path

from genjudge.demo.training import generator_answers, train_generator
from judges import ROOT


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_retraining_the_generator_reproduces_the_committed_checkpoint(tmp_path):
    out = tmp_path / "demo-generator"
    train_generator(out, ROOT)
    committed = ROOT / "models" / "demo-generator"
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert digest(out / name) == digest(committed / name), name


def test_generator_is_taught_a_fixed_quarter_of_wrong_answers():
    questions = [json.loads(line) for line in open(ROOT / "config/demo/questions.jsonl")]
    taught = generator_answers(questions)
    wrong = [q for q in questions if taught[q["id"]] != q["answer"]]
    assert len(wrong) == round(0.25 * len(questions))
    assert taught == generator_answers(questions)
