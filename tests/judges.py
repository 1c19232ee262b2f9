"""Small real judge checkpoints for the tests: built offline, then taught one fixed answer."""

from __future__ import annotations

import json
from pathlib import Path

from genjudge.demo.finetune import finetune
from genjudge.demo.models import build_model
from genjudge.engine.loading import load_tokenizer
from genjudge.engine.prompting import render_prompt
from genjudge.judging import modes
from genjudge.judging.templates import load_template, render

ROOT = Path(__file__).resolve().parents[1]


def constant_judge(path: Path, mode: str, answer: str, steps: int = 60, template_path=None) -> Path:
    """A judge that has learned to answer `answer` to any prompt of `mode`'s template."""
    judge_mode = modes.get(mode)
    template_path = template_path or ROOT / judge_mode.default_template()
    build_model(path, [ROOT / "config/demo/questions.jsonl", template_path], seed=5)
    tok = load_tokenizer(str(path))
    template = load_template(template_path, judge_mode)
    questions = [json.loads(line) for line in (ROOT / "config/demo/questions.jsonl").read_text().splitlines()]
    pairs = []
    for i, q in enumerate(questions):
        values = {"question": q["question"], "reference": q["answer"]}
        if "answer_a" in judge_mode.placeholders:
            values.update(answer_a=f"answer {i}", answer_b=q["answer"])
        else:
            values.update(candidate=f"{i}")
        pairs.append((render_prompt(tok, render(template, **values), None, True), answer))
    finetune(str(path), pairs, steps=steps, batch_size=8)
    return path


def judge_with(*, lease, log_stream, parallel: str = "device_map", judge_name: str = "", **fields):
    """stages.judge.run_judge on a JudgeJob made of `fields` (paths as text, the cells as a tuple), as
    the tests and benches state a judge job: the job script builds it from the config instead."""
    from genjudge.config.jobs import JudgeJob
    from genjudge.stages.judge import run_judge

    paths = ("out_path", "meta_path", "template_path", "store_dir", "cache_dir")
    fields = {k: str(v) if k in paths and v is not None else v for k, v in fields.items()}
    fields["cells"] = tuple(fields["cells"])
    fields["generations"] = {k: str(v) for k, v in fields["generations"].items()}
    return run_judge(JudgeJob(judge=judge_name, **fields), lease, log_stream, parallel=parallel)
