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


RUBRIC_TEMPLATE = ROOT / "tests/data/rubric_judge_template.txt"
RUBRIC_DATA = ROOT / "tests/data/rubric_demo.jsonl"
# HealthBench's field names, as its jsonl is published (tests/data/rubric_demo.jsonl has its shape).
HEALTHBENCH_FIELDS = {
    "id": "prompt_id",
    "prompt": "prompt",
    "reference": None,
    "category": None,
    "rubric": "rubrics",
    "tags": "example_tags",
}
UNSURE = "Checks the result"  # criteria the rubric judge answers with no JSON: unparsed, asked again


def rubric_reply(criterion: dict) -> str:
    """What the test's rubric judge learns to answer: met where the points are positive, not met where
    negative, and no JSON at all for the criteria that start with UNSURE."""
    if criterion["criterion"].startswith(UNSURE):
        return "I am not sure."
    met = "true" if criterion["points"] > 0 else "false"
    return f'{{"explanation": "checked", "criteria_met": {met}}}'


def rubric_judge(path: Path, steps: int = 150) -> Path:
    """A judge that has learned rubric_reply on the compact rubric template (tests/data)."""
    from genjudge.judging.modes.rubric import conversation_text, rubric_item

    rows = [json.loads(line) for line in RUBRIC_DATA.read_text().splitlines()]
    replies = sorted({rubric_reply(c) for r in rows for c in r["rubrics"]})
    corpus = path.parent / f"{path.name}-corpus.txt"
    corpus.write_text("\n".join([RUBRIC_TEMPLATE.read_text(), *replies, *(json.dumps(r) for r in rows)]))
    build_model(path, [corpus, ROOT / "config/demo/questions.jsonl"], seed=7)
    tok = load_tokenizer(str(path))
    template = RUBRIC_TEMPLATE.read_text()
    pairs = []
    for r in rows:
        for answer in ("42", "The answer is 7.", ""):
            row = type("Row", (), {"messages": json.dumps(r["prompt"]), "prompt": r["prompt"][-1]["content"]})()
            convo = conversation_text(row, answer)
            for c in r["rubrics"]:
                prompt = render(template, conversation=convo, rubric_item=rubric_item(c))
                pairs.append((render_prompt(tok, prompt, None, True), rubric_reply(c)))
    finetune(str(path), pairs, steps=steps, batch_size=16)
    return path


def generate_with(*, lease, log_stream, **fields):
    """stages.generate.run_generate on a GenerateJob made of `fields` (paths as text), as the tests state a
    generate job: the job script builds it from the config instead."""
    from genjudge.config.jobs import GenerateJob
    from genjudge.stages.generate import run_generate

    paths = ("shard_path", "out_path", "meta_path", "store_dir", "cache_dir")
    fields = {k: str(v) if k in paths and v is not None else v for k, v in fields.items()}
    return run_generate(GenerateJob(**fields), lease, log_stream)
