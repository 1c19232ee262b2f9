"""The worked examples in config/examples/ plan against small fixtures of the same shape."""

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from judges import ROOT

pytestmark = pytest.mark.workflow
CFG70 = ROOT / "tests" / "data" / "llama-3.1-70b-config"


def stand_in_models(workflow, cfg):
    """Hub ids as local directories holding config.json and stand-ins for the tokenizer and weights
    files planning looks for (nothing is downloaded, nothing loads them)."""
    names = [g["model"] for key in ("generators", "judges") for g in cfg.get(key, {}).values() if g.get("model")]
    names += [cfg[role]["model"] for role in ("generator", "judge") if cfg[role].get("model")]
    for name in names:
        (workflow.path / name).mkdir(parents=True, exist_ok=True)
        shutil.copy(CFG70 / "config.json", workflow.path / name / "config.json")
        for stand_in in ("tokenizer.json", "model.safetensors"):
            (workflow.path / name / stand_in).touch()


def test_gsm8k_example_plans_with_extraction_and_one_judge_load(workflow):
    cfg = yaml.safe_load((ROOT / "config/examples/gsm8k.yaml").read_text())
    stand_in_models(workflow, cfg)
    data = workflow.path / "gsm8k_test.jsonl"  # the same fields as openai/gsm8k's test split
    data.write_text(
        "".join(
            json.dumps(
                {
                    "question": f"Tom has {i} apples and buys {i}. How many?",
                    "answer": f"He has {i} + {i} = {2 * i}.\n#### {2 * i}",
                }
            )
            + "\n"
            for i in range(40)
        )
    )
    cfg["dataset"].update(path=str(data), format="auto")
    cfg["lock_dir"] = str(workflow.lock_dir)
    path = workflow.path / "config" / "gsm8k-fixture.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = workflow.run("-n", "--configfile", path, "--quiet", "rules").stdout
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
    assert jobs["generate"] == "16" and jobs["judge"] == "1" and jobs["merge"] == "2"


def plan(workflow, cfg, name) -> dict:
    """Dry-run an example's config (models stood in, lock dir of the test) and count the jobs."""
    stand_in_models(workflow, cfg)
    cfg["lock_dir"] = str(workflow.lock_dir)
    path = workflow.path / "config" / f"{name}-fixture.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = workflow.run("-n", "--configfile", path, "--quiet", "rules").stdout
    return dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))


CATEGORIES = ["writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"]
REFERENCED = {"math", "reasoning", "coding"}


def mt_bench_fixture(path):
    """FastChat's question.jsonl with the GPT-4 references joined in: two turns, a list of two
    references for math, reasoning and coding only."""
    rows = []
    for i, cat in enumerate(CATEGORIES * 2):
        row = {"question_id": 81 + i, "category": cat, "turns": [f"{cat} question {i}?", f"Follow-up {i}?"]}
        if cat in REFERENCED:
            row["reference"] = [f"ref {i}.1", f"ref {i}.2"]
        rows.append(row)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_mt_bench_single_example_plans_and_picks_fastchat_templates_per_category_and_turn(workflow):
    from genjudge.config.specs import spec_for
    from genjudge.data.conversation import expand_turns, with_history
    from genjudge.data.dataset import load_items
    from genjudge.judging import modes
    from genjudge.judging.template_rules import Templates

    cfg = yaml.safe_load((ROOT / "config/examples/mt_bench_single.yaml").read_text())
    data = workflow.path / cfg["dataset"]["path"]
    mt_bench_fixture(data)
    jobs = plan(workflow, cfg, "mt-single")
    assert jobs["generate"] == "4" and jobs["merge"] == "1" and jobs["judge"] == "1"

    # The templates each (category, turn) gets, filled as FastChat fills them.
    items = load_items(data, cfg["dataset"]["fields"])
    rows = expand_turns(items)
    rows["output"] = [f"answer {i}.{t}" for i, t in zip(rows["id"], rows["turn"])]
    rows = with_history(rows)
    score = modes.get("score")
    j = cfg["judge"]
    templates = Templates(ROOT / j["template"], j["templates"], score)
    spec = spec_for("judge", model="x", mode="score", verdict_pattern=j["verdict_pattern"])
    texts = {}
    for row in rows.itertuples():
        path = templates.path_for(row.category, row.turn)
        if (row.category, row.turn) not in texts:  # the first item of each category
            texts[(row.category, row.turn)] = score.requests(rows.loc[[row.Index]], spec, templates.texts[path])[0]
    name = {k: Path(templates.path_for(*k)).name for k in texts}
    assert name[("math", 1)] == "single-math-v1.txt" and name[("coding", 2)] == "single-math-v1-multi-turn.txt"
    assert name[("writing", 1)] == "single-v1.txt" and name[("stem", 2)] == "single-v1-multi-turn.txt"
    math2 = texts[("math", 2)].text  # item 84: math, the fourth question
    for part in ("### User:\nmath question 3?", "### Assistant A:\nanswer 84.1", "### User:\nFollow-up 3?"):
        assert part in math2
    assert "### Reference answer:\nref 3.1" in math2 and "### Reference answer:\nref 3.2" in math2
    assert "### Assistant A:\nanswer 84.2" in math2 and "{" not in math2
    # FastChat's ratings parse with decimals; one off the scale is unparsed with the reason.
    rx = score.compile(j["verdict_pattern"])
    options = {"score_range": j["score_range"]}
    assert score.parse_text("Fine overall. Rating: [[7.5]]", rx, True, options).verdict == "7.5"
    off = score.parse_text("Rating: [[37]]", rx, True, options)
    assert (off.reason, off.detail) == ("score outside 1-10", "score 37")


def test_mt_bench_pairwise_example_plans_both_generators_and_swaps_whole_conversations(workflow):
    from genjudge.config.specs import spec_for
    from genjudge.data.conversation import expand_turns, with_history
    from genjudge.data.dataset import load_items
    from genjudge.judging import modes
    from genjudge.judging.template_rules import Templates

    cfg = yaml.safe_load((ROOT / "config/examples/mt_bench_pairwise.yaml").read_text())
    data = workflow.path / cfg["dataset"]["path"]
    mt_bench_fixture(data)
    jobs = plan(workflow, cfg, "mt-pair")
    assert jobs["generate"] == "8" and jobs["merge"] == "2" and jobs["judge"] == "1"

    rows = with_history(expand_turns(load_items(data, cfg["dataset"]["fields"])).assign(output="mine"))
    opponent = {(i, t): f"theirs {i}.{t}" for i, t in zip(rows["id"], rows["turn"])}
    pair = modes.get("pairwise")
    j = cfg["judge"]
    templates = Templates(ROOT / j["template"], j["templates"], pair)
    writing2 = rows[(rows["category"] == "writing") & (rows["turn"] == 2)].head(1)
    text = templates.texts[templates.path_for("writing", 2)]
    first, second = pair.requests(writing2, spec_for("judge", model="x", mode="pairwise"), text, opponent)
    assert "### Assistant A:\nmine" in first.text and "### Assistant B:\ntheirs 81.1" in first.text
    assert "### Assistant A:\ntheirs 81.1" in second.text and "### Assistant B:\nmine" in second.text
    assert (first.turn, second.turn) == (2, 2)
    rx = pair.compile(j["verdict_pattern"])
    assert pair.parse_text("Both fine. [[C]]", rx, True).verdict == "tie"


def test_gsm8k_and_mt_bench_study_plans_each_judge_on_its_benchmark(workflow):
    from genjudge import config as wfconfig
    from genjudge.config.experiment import resolve

    cfg = yaml.safe_load((ROOT / "config/examples/gsm8k_mt_bench.yaml").read_text())
    mt_bench_fixture(workflow.path / cfg["datasets"]["mtbench"]["path"])
    gsm8k = workflow.path / "gsm8k_test.jsonl"  # openai/gsm8k's fields, as a local file
    gsm8k.write_text(
        "".join(
            json.dumps({"question": f"{i} + {i}?", "answer": f"{i} + {i} = {2 * i}\n#### {2 * i}"}) + "\n"
            for i in range(40)
        )
    )
    cfg["datasets"]["gsm8k"].update(path=str(gsm8k), format="auto")
    jobs = plan(workflow, cfg, "study")
    # 2 generators x (8 GSM8K shards + 2 MT-bench shards); one job per judge
    assert jobs["generate"] == "20" and jobs["merge"] == "4" and jobs["judge"] == "2" and jobs["split"] == "2"
    exp = resolve(wfconfig.validate(cfg))
    assert {j: [c.key for c in exp.cells(j)] for j in exp.judges} == {
        "gsm8k-ref": ["llama8b/gsm8k", "qwen7b/gsm8k"],
        "mtbench-score": ["llama8b/mtbench", "qwen7b/mtbench"],
    }
    out = workflow.run("-n", "--configfile", workflow.path / "config" / "study-fixture.yaml", "--printshellcmds")
    inputs = re.findall(
        r"rule judge:\n\s+input: ([^\n]+)\n\s+output: results/gsm8k-mt-bench/judge/([\w-]+)/", out.stdout
    )
    reads = {judge: sorted(re.findall(r"generations/(\w+/\w+)\.parquet", files)) for files, judge in inputs}
    assert reads == {
        "gsm8k-ref": ["llama8b/gsm8k", "qwen7b/gsm8k"],
        "mtbench-score": ["llama8b/mtbench", "qwen7b/mtbench"],
    }


def test_alpaca_eval_example_plans_against_a_baseline_built_from_published_outputs(workflow):
    from genjudge.cli import main

    cfg = yaml.safe_load((ROOT / "config/examples/alpaca_eval.yaml").read_text())
    data = workflow.path / cfg["dataset"]["path"]
    data.parent.mkdir(parents=True, exist_ok=True)
    sets = ["helpful_base", "koala", "oasst", "selfinstruct", "vicuna"]
    rows = [
        {
            "instruction": f"Write a haiku about {i}.",
            "output": f"baseline {i}",
            "generator": "gpt4",
            "dataset": sets[i % 5],
        }
        for i in range(20)
    ]
    data.write_text(json.dumps(rows, indent=2))  # a JSON array, as alpaca_eval.json is
    cfg_path = workflow.path / "config" / "alpaca-src.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    baseline = workflow.path / cfg["judge"]["baseline"]
    argv = ["baseline", "--configfile", str(cfg_path), "--directory", str(workflow.path), str(data), str(baseline)]
    assert main(argv) == 0
    import pandas as pd

    from genjudge.data.dataset import load_items

    base = pd.read_parquet(baseline)
    items = load_items(data, {"id": None, "prompt": "instruction", "reference": None, "category": "dataset"})
    assert base["id"].tolist() == items["id"].tolist() and base["output"].tolist()[3] == "baseline 3"
    cfg["dataset"]["path"], cfg["judge"]["baseline"] = str(data), str(baseline)
    jobs = plan(workflow, cfg, "alpaca")
    assert jobs["generate"] == "4" and jobs["judge"] == "1"


def test_truthfulqa_example_plans_from_the_csv(workflow):
    cfg = yaml.safe_load((ROOT / "config/examples/truthfulqa.yaml").read_text())
    data = workflow.path / cfg["dataset"]["path"]
    data.parent.mkdir(parents=True, exist_ok=True)
    header = "Type,Category,Question,Best Answer,Correct Answers,Incorrect Answers,Source\n"
    body = "".join(
        f'Adversarial,Misconceptions,"What happens if you do thing {i}, really?",Nothing in particular happens,'
        f'"Nothing happens; It is fine","You die; You get lucky",https://example.org/{i}\n'
        for i in range(12)
    )
    data.write_text(header + body)
    jobs = plan(workflow, cfg, "truthfulqa")
    assert jobs["generate"] == "4" and jobs["judge"] == "1"


def readme_study() -> tuple[str, list[str]]:
    """The README's "Your own study": its config and its four commands, as printed."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    part = text[text.index("## Your own study") :]
    config = part[part.index("```yaml\n") + 8 :]
    config = config[: config.index("```")]
    block = part[part.index("**The four commands**") :]
    block = block[block.index("```bash\n") + 8 :]
    return config, [line for line in block[: block.index("```")].splitlines() if line.strip()]


def test_the_readmes_study_plans_and_dry_runs_exactly_as_printed(workflow, tmp_path):
    import shlex
    import subprocess
    import sys

    from conftest import clean_env

    config, commands = readme_study()
    cfg = yaml.safe_load(config)
    stand_in_models(workflow, cfg)
    gsm8k = workflow.path / "data" / "gsm8k" / "test.jsonl"  # what the README's datasets command writes
    gsm8k.parent.mkdir(parents=True)
    gsm8k.write_text(
        "".join(
            json.dumps({"question": f"{i} + {i}?", "answer": f"{i} + {i} = {2 * i}\n#### {2 * i}"}) + "\n"
            for i in range(40)
        )
    )
    mt_bench_fixture(workflow.path / "data" / "mt_bench" / "question.jsonl")
    (workflow.path / "config" / "my_study.yaml").write_text(config)
    # No SLURM tools (where they are installed but reach no cluster, the plugin's import waits on them).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("which", "sh", "bash", "git", "env"):
        if found := shutil.which(tool):
            (bin_dir / tool).symlink_to(found)
    env = clean_env(PATH=f"{bin_dir}:{Path(sys.executable).parent}", GENJUDGE_LOCK_DIR=str(workflow.lock_dir))
    program = {
        ".venv/bin/genjudge": [sys.executable, "-m", "genjudge.cli"],
        ".venv/bin/snakemake": [sys.executable, "-m", "snakemake"],
    }
    assert len(commands) == 4 and commands[3] == commands[2].replace(" -n ", " ")  # the run is the dry run's command
    out = []
    for command in commands[:3]:
        head, *args = shlex.split(command)
        proc = subprocess.run([*program[head], *args], cwd=workflow.path, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, (command, proc.stdout[-2000:], proc.stderr[-3000:])
        out.append(proc.stdout + proc.stderr)
    plan, slurm, dry = out
    assert "meta-llama/Llama-3.1-70B-Instruct" in plan and "wall-clock of the whole run" in plan
    assert "KV cache" in plan and "resources.judge.runtime" in plan and "judge.parallel" in plan
    jobs = {line.split(" (")[0]: line for line in slurm.splitlines() if line.startswith(("generate", "judge"))}
    assert "-A myproj" in slurm and "-p gpu-small" in jobs["generate"] and "-p gpu-large" in jobs["judge"]
    # 2 generators x (8 GSM8K shards + 2 MT-bench shards); one job per judge, each on its benchmark.
    assert dry.count("rule generate:") == 20 and dry.count("rule judge:") == 2 and dry.count("rule merge:") == 4
    assert "results/my-study/judge/gsm8k-ref/" in dry and "results/my-study/judge/mtbench-score/" in dry


def test_the_healthbench_example_plans_a_grader_request_per_criterion_and_a_physicians_row(workflow):
    """HealthBench's published shape (tests/data/rubric_demo.jsonl has it): generation jobs for the model
    only, the physicians' answers read from the dataset, one judge job whose requests are the criteria."""
    cfg = yaml.safe_load((ROOT / "config/examples/healthbench.yaml").read_text())
    data = workflow.path / "oss_eval.jsonl"
    shutil.copy(ROOT / "tests" / "data" / "rubric_demo.jsonl", data)
    cfg["dataset"]["path"] = str(data)
    jobs = plan(workflow, cfg, "healthbench")
    assert jobs["generate"] == "8" and jobs["merge"] == "2" and jobs["judge"] == "1", jobs
    from conftest import genjudge_cli

    out = genjudge_cli(
        "plan", "--configfile", str(workflow.path / "config" / "healthbench-fixture.yaml"), cwd=workflow.path
    )
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    criteria = sum(len(r["rubrics"]) for r in rows)
    answered = sum(len(r["rubrics"]) for r in rows if r["ideal_completions_data"])
    assert f"about {criteria + answered:,} requests" in out.stdout or f"{criteria + criteria:,}" in out.stdout, (
        out.stdout
    )


def test_the_wildbench_example_shows_each_tasks_checklist_and_reports_wb_score(workflow):
    cfg = yaml.safe_load((ROOT / "config/examples/wildbench.yaml").read_text())
    data = workflow.path / "wildbench.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {
                    "session_id": f"s{i}",
                    "question": f"Plan a {i}-day trip.",
                    "primary_tag": ["Planning", "Advice"][i % 2],
                    "checklist": ["Gives a day-by-day plan", f"Fits {i} days"],
                }
            )
            + "\n"
            for i in range(12)
        )
    )
    cfg["dataset"]["path"] = str(data)
    jobs = plan(workflow, cfg, "wildbench")
    assert jobs["generate"] == "8" and jobs["judge"] == "1", jobs
