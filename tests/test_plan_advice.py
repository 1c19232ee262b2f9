"""A plan that changes the config: the advice (engine x shards, precision x judge.parallel), the
overlay `genjudge plan --write` writes and the SLURM dry run that then asks for its resources, the
batch the jobs will run, what planning refuses, and planning from a login node (config.json only)."""

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import clean_env, genjudge_cli
from test_time_model import LLAMA_8B, LLAMA_70B, Q_GSM, REF_GSM

from genjudge import config as wfconfig
from genjudge.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A new user's study: an 8B generator on GSM8K's 1,319 questions in 8 shards (as the examples),
    a 70B judge; stand-in config.jsons only (as a login node has them)."""
    d = tmp_path_factory.mktemp("study")
    for name, cfg in (("Llama-3.1-8B-Instruct", LLAMA_8B), ("Llama-3.1-70B-Instruct", LLAMA_70B)):
        (d / name).mkdir()
        (d / name / "config.json").write_text(json.dumps(cfg))
    with open(d / "gsm8k.jsonl", "w") as fh:
        for i in range(1319):
            row = {"question": f"{i:04d}".ljust(Q_GSM, "q"), "answer": "a" * (REF_GSM - 7) + "#### 72"}
            fh.write(json.dumps(row) + "\n")
    cfg = {
        "run": "study",
        "shards": 8,
        "dataset": {"path": str(d / "gsm8k.jsonl"), "fields": {"id": None, "category": None}},
        "generator": {"model": str(d / "Llama-3.1-8B-Instruct"), "max_new_tokens": 512, "dtype": "bfloat16"},
        "judge": {"model": str(d / "Llama-3.1-70B-Instruct"), "max_new_tokens": 256, "dtype": "bfloat16"},
    }
    return d, cfg


def plan_lines(cfg, gpus="4xH100", **kw):
    from genjudge.stages.plan import make_plan

    lines, plans = make_plan(wfconfig.validate(json.loads(json.dumps(cfg)), ROOT), gpus, workflow_dir=ROOT, **kw)
    return "\n".join(lines), plans


def test_the_advice_for_a_new_users_study_is_vllm_with_one_shard_per_gpu(study, tmp_path):
    _, cfg = study
    out, _ = plan_lines(cfg, write=str(tmp_path / "overlay.yaml"))
    advice = out[out.index("advice (") :]
    # 8 shards of transformers pay start-up 8 times and decode each batch to its longest answer; vLLM's
    # continuous batching over one shard per GPU is the fastest.
    m = re.search(
        r"  generators: engine vllm, shards 4: about ([\d.]+) min \(4 job\(s\).*, ([\d.]+)x the configured", advice
    )
    assert m, advice
    assert float(m[2]) > 1.5 and "about one job per GPU (4 jobs on 4)" in advice
    assert re.search(r"engine transformers, shards 8: .* \[configured\]", advice)
    # The judge: bf16 tensor parallelism beats one 4-bit replica per GPU, and 8-bit is the slowest.
    options = {
        m.group(1, 2, 3): float(m[4]) * (60 if m[5] == "h" else 1)
        for m in re.finditer(r"engine (\w+), quantization (\w+), parallel (\w+): about ([\d.]+) (min|h)", advice)
    }
    assert options[("transformers", "none", "tensor")] < options[("transformers", "4bit", "replicas")]
    assert "8-bit (LLM.int8) is the slowest precision here" in advice
    layer = yaml.safe_load((tmp_path / "overlay.yaml").read_text())
    # The overlay writes only what leaves results unchanged: the engine is in every item key.
    assert layer["shards"] == 4 and "generator" not in layer
    assert "engine" not in layer["judge"] and layer["judge"]["parallel"] in ("tensor", "replicas")
    assert "  changes results: generators Llama-3.1-8B-Instruct: engine vllm" in advice
    assert "--write leaves it out unless given --allow-result-changes" in advice
    for step in ("generate", "judge"):
        assert set(layer["resources"][step]) == {"runtime", "mem_mb"}
    # ... and another engine only when asked for.
    out, _ = plan_lines(cfg, write=str(tmp_path / "all.yaml"), allow_result_changes=True)
    layer = yaml.safe_load((tmp_path / "all.yaml").read_text())
    assert layer["generator"] == {"engine": "vllm", "batch_size": "auto"}
    assert "  written with --allow-result-changes: generators Llama-3.1-8B-Instruct: engine vllm" in out


def test_vllm_decodes_the_answers_tokens_over_its_concurrency(study):
    """Continuous batching: decoding lasts the requests' answer tokens over the sequences running at
    once (max_new_tokens where no run measured them, said so); transformers decodes every batch to its
    longest answer."""
    from genjudge.planning.time_model import Calibration, Device, Layout, ModelNumbers, Requests, VllmEngine, job_time

    model = ModelNumbers(8e9, 16e9, 131_072, 32, "bfloat16", bf16_weight_bytes=16e9)
    h100 = Device("H100", 80 * 2**30, 3.35e12, 989e12)
    upper = job_time(model, h100, Layout("one", 1), [Requests(1000, 100, 512)], 200, VllmEngine())
    measured = job_time(model, h100, Layout("one", 1), [Requests(1000, 100, 512, answer_tokens=128)], 200, VllmEngine())
    # 1000 answers of 511 steps over 200 at once: 2,555 steps; of 127: 635.
    assert upper.term("decode step overhead") / measured.term("decode step overhead") == pytest.approx(2555 / 635)
    assert "counted at max_new_tokens (an upper bound" in " ".join(upper.notes)
    assert "(measured)" in " ".join(measured.notes)
    eager = job_time(model, h100, Layout("one", 1), [Requests(1000, 100, 512)], 200, calibration=Calibration(""))
    assert eager.term("decode step overhead") / upper.term("decode step overhead") > 1  # 5 batches x 511 steps


def test_the_plan_names_the_gpu_its_constants_were_measured_on(study):
    _, cfg = study
    h100, _ = plan_lines(cfg, "4xH100")
    a100, _ = plan_lines(cfg, "4xA100-80GB")
    assert "step_overhead_per_layer: measured on NVIDIA H100 80GB HBM3 (torch 2.11.0+cu130" in h100
    assert "step_overhead_per_layer: never measured on NVIDIA A100-SXM4-80GB; the figure of NVIDIA H100" in a100
    assert (
        "vLLM's start-up and per-step figures: never measured on a GPU"
        in plan_lines({**cfg, "generator": {**cfg["generator"], "engine": "vllm"}}, "4xH100")[0]
    )


@pytest.mark.workflow
def test_plan_and_job_choose_the_same_batch_on_the_tiny_model(workflow):
    """batch_size auto: the plan prints the batch the job then runs (one function decides both); on a
    CPU a fixed 16, at most the job's requests: 11 items in the generation job, 11 answers to judge."""
    rows = (workflow.path / "config" / "demo" / "questions.jsonl").read_text().splitlines()[:11]
    (workflow.path / "config" / "demo" / "eleven.jsonl").write_text("\n".join(rows) + "\n")
    cfg = workflow.write_config(
        shards=1,
        dataset={"path": "config/demo/eleven.jsonl"},
        generator={"batch_size": "auto"},
        judge={"batch_size": "auto"},
    )
    plan = genjudge_cli("plan", "--configfile", cfg, "--directory", workflow.path, env=clean_env(), check=True).stdout
    planned = {m[1]: int(m[2]) for m in re.finditer(r"^(generator|judge): .*?\n(?:.*\n)*?  batch: (\d+)", plan, re.M)}
    judged = workflow.results() / "judge" / "demo-judge" / "raw.meta.json"
    workflow.run(str(judged.relative_to(workflow.path)), "--cores", "2", "--configfile", cfg)
    gen = workflow.metas()
    judge = json.loads(judged.read_text())
    assert len(gen) == 1 and gen[0]["n_items"] == 11
    assert gen[0]["batch_size"] == planned["generator"] == 11
    assert judge["batch_size"] == planned["judge"] == 11
    assert {m["batch_choice"]["decided_by"] for m in [*gen, judge]} == {"cpu"}
    assert all(m["batch_search_seconds"] == 0 for m in [*gen, judge])


def tiny_llama(path: Path, layers=2, heads=4, kv=4):
    cfg = {
        **LLAMA_8B,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "hidden_size": 64 * heads,
        "intermediate_size": 256,
    }
    path.mkdir()
    (path / "config.json").write_text(json.dumps(cfg))
    return str(path)


def test_vllm_layouts_that_cannot_start_are_refused_while_planning(study, tmp_path):
    from genjudge.config.experiment import resolve
    from genjudge.config.job_settings import slurm_from_config, vllm_models
    from genjudge.engine.judge_parallel import check_vllm_layouts

    _, cfg = study
    # 6 heads do not split over 4 GPUs: vLLM would use 4 pipeline stages, and the model has 2 layers.
    two_layers = tiny_llama(tmp_path / "two", layers=2, heads=6, kv=6)
    judges = {"small": {"model": two_layers, "engine": "vllm", "gpus": 4}}
    config = wfconfig.validate({**cfg, "judges": judges}, ROOT)
    with pytest.raises(
        InputError, match=r"judges\.small\.gpus: 4 GPUs per job .* 4 pipeline stages, more than its 2 layers"
    ):
        check_vllm_layouts(vllm_models(config, resolve(config)), slurm_from_config(config), ["0", "1", "2", "3"], False)
    # An explicit tensor split that does not divide the heads.
    deep = tiny_llama(tmp_path / "deep", layers=8, heads=6, kv=6)
    judges = {"big": {"model": deep, "engine": "vllm", "gpus": 4, "parallel": "tensor"}}
    config = wfconfig.validate({**cfg, "judges": judges}, ROOT)
    with pytest.raises(
        InputError, match=r"judges\.big\.parallel: tensor .*its 6 attention heads do not split evenly over 4 GPUs"
    ):
        check_vllm_layouts(vllm_models(config, resolve(config)), slurm_from_config(config), ["0", "1", "2", "3"], False)
    # The plan stops too, naming the key.
    with pytest.raises(InputError, match=r"judges\.small\.gpus"):
        plan_lines({**cfg, "judges": {"small": {"model": two_layers, "engine": "vllm", "gpus": 4}}}, "4xH100")


def test_a_vllm_context_shorter_than_a_prompt_and_its_answer_is_refused(study):
    _, cfg = study
    gen = {**cfg["generator"], "engine": "vllm", "vllm": {"max_model_len": 256}}
    with pytest.raises(InputError, match=r"generator\.vllm\.max_model_len: 256 tokens, less than the longest prompt"):
        plan_lines({**cfg, "generator": gen})


def test_a_dataset_that_cannot_be_read_stops_the_plan(study, tmp_path):
    _, cfg = study
    bad = {**cfg, "dataset": {**cfg["dataset"], "path": "no/such/file.jsonl"}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(bad))
    proc = genjudge_cli("plan", "--configfile", "c.yaml", "--gpus", "4xH100", cwd=tmp_path, env=clean_env())
    assert proc.returncode == 1
    assert re.search(
        r"error: dataset\.path: .*no/such/file\.jsonl.*relative paths are read from " + re.escape(str(tmp_path)),
        proc.stderr,
    )
    assert "wall-clock" not in proc.stdout


def test_relative_paths_resolve_against_the_workflow_directory(study, tmp_path):
    """genjudge plan --directory D reads the config's relative paths from D, as snakemake --directory."""
    d, cfg = study
    (tmp_path / "data").mkdir()
    shutil.copy(d / "gsm8k.jsonl", tmp_path / "data" / "gsm8k.jsonl")
    rel = {**cfg, "dataset": {**cfg["dataset"], "path": "data/gsm8k.jsonl"}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(rel))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    args = ["plan", "--configfile", tmp_path / "c.yaml", "--gpus", "4xH100"]
    wrong = genjudge_cli(*args, cwd=elsewhere, env=clean_env())
    assert wrong.returncode == 1 and "data/gsm8k.jsonl" in wrong.stderr
    shutil.copytree(ROOT / "config", tmp_path / "config")  # the workflow's schema and templates
    right = genjudge_cli(*args, "--directory", tmp_path, cwd=elsewhere, env=clean_env())
    assert right.returncode == 0, right.stderr
    assert "requests per job (item, turn, sample): gsm8k: 165" in right.stdout


@pytest.mark.workflow
def test_a_dry_run_needs_only_each_models_config_json_and_the_written_overlay_reaches_slurm(workflow):
    """A login node holds the models' config.json, not their weights: `genjudge plan --write` writes an
    overlay from them, the dry run plans, the SLURM dry run asks for the overlay's resources; a real run
    stops before any job, naming what is missing; the job itself checks again before any item."""
    for m in ("generator", "judge"):  # a demo-* name: the demo's compact judge template stays allowed
        (workflow.path / "models" / f"demo-login-{m}").mkdir()
        shutil.copy(
            workflow.path / "models" / f"demo-{m}" / "config.json", workflow.path / "models" / f"demo-login-{m}"
        )
    cfg = workflow.write_config(
        shards=2, generator={"model": "models/demo-login-generator"}, judge={"model": "models/demo-login-judge"}
    )
    overlay = workflow.path / "overlay.yaml"
    genjudge_cli("plan", "--configfile", cfg, "--write", overlay, cwd=workflow.path, env=clean_env(), check=True)
    layer = yaml.safe_load(overlay.read_text())
    want = layer["resources"]["generate"]
    assert want["runtime"] >= 1 and want["mem_mb"] >= 1000
    # No run measured these models: the comments say what the runtime rests on and the margin that follows.
    text = overlay.read_text()
    assert "x1.5 more\n# for each kind of figure the estimate assumed rather than measured" in text
    assert re.search(
        r"^# resources\.generate\.runtime, generator demo-login-generator: x1\.5 x 1\.5 per assumed kind of figure = "
        r"x5\.06; it rests on 3 assumed: compute: .*; load: 1 GB/s read rate assumed .*; engine constants never "
        r"measured on this device \(transformers' job figures: see constants\)",
        text,
        re.M,
    ), text
    assert "--calibrate results/<pilot> to replace them" in text
    dry = workflow.run("-n", "--configfile", cfg)
    assert "generate" in dry.stdout and "Job stats" in dry.stdout + dry.stderr
    # The SLURM dry run with the overlay over the config: its generate jobs ask for the overlay's resources.
    slurm = workflow.run(
        "-n", "--profile", "profiles/slurm", "--configfile", cfg, overlay, env=clean_env(SLURM_CONF="/nonexistent")
    )
    text = slurm.stdout + slurm.stderr
    assert "rule generate:" in text
    block = text[text.index("rule generate:") :]
    block = block[: block.index("\n\n")]
    assert f"mem_mb={want['mem_mb']}" in block and f"runtime={want['runtime']}" in block, block
    real = workflow.run("--cores", "2", "--configfile", cfg, check=False)
    assert real.returncode != 0
    assert re.search(r"generator\.model: 'models/demo-login-generator' has no tokenizer", real.stdout + real.stderr)
    assert not (workflow.results() / "generations").exists()


def test_the_job_checks_the_model_files_before_any_item(tmp_path):
    from genjudge.config.specs import spec_for
    from genjudge.engine.completion import PromptSet

    (tmp_path / "m").mkdir()
    shutil.copy(ROOT / "models" / "demo-judge" / "config.json", tmp_path / "m")
    with pytest.raises(
        InputError, match=r"judge model '.*m' has no tokenizer .*: this job cannot load it; nothing was computed"
    ):
        PromptSet(spec_for("judge", model=str(tmp_path / "m")), kind="judge")


def generator_entry(cfg, gpus="4xH100"):
    """(config, experiment, the plan's generator entry) for `cfg` on `gpus`."""
    from genjudge.config.experiment import resolve
    from genjudge.engine.memory_plan import parse_inventory_spec
    from genjudge.planning.time_model import GB
    from genjudge.stages.plan import load_datasets
    from genjudge.stages.plan_roles import plan_generator

    config = wfconfig.validate(json.loads(json.dumps(cfg)), ROOT)
    exp = resolve(config)
    items, _ = load_datasets(exp, config)
    rate = config["plan"]["load_gb_per_s"] * GB
    return (
        config,
        exp,
        plan_generator(
            config, exp, next(iter(exp.generators)), items, parse_inventory_spec(gpus), None, None, None, rate
        ),
    )


def test_a_generators_batch_search_is_counted_in_its_plan_and_its_advice(study):
    """batch_size auto on GPUs: a generator job probes 8, 64 and its 165 requests first, as a judge job
    does; the advice's configured option is the same job, so the same seconds."""
    from genjudge.stages.plan_advice import generator_options

    _, cfg = study
    config, exp, e = generator_entry(cfg)
    t = e.times["gsm8k"]
    assert t.term("batch search") > 0
    assert "probes of 8, 64, 165 sequences" in "\n".join(t.lines())
    configured = next(o for o in generator_options(config, exp, [e], [1, 1, 1, 1]) if o.configured)
    assert configured.longest_job == pytest.approx(t.seconds)


def test_plan_and_job_decide_compile_alike(study):
    """compile: auto on the same model numbers, GPU and requests: the plan (planned_engine, the GPU as
    --gpus names it) and the job (use_compile with its loaded model, the GPU as torch names it) decide
    alike: 20 requests stay eager (42 s of compiling do not pay back), 5,000 compile. On a CPU auto never
    compiles."""
    from genjudge.config.specs import spec_for
    from genjudge.engine.compiling import use_compile
    from genjudge.engine.loading import load_causal_lm
    from genjudge.engine.memory_plan import parse_inventory_spec, plan
    from genjudge.planning.time_model import Layout, ModelNumbers, Requests, gpu_device
    from genjudge.stages.plan_roles import planned_engine

    d, _ = study
    spec = spec_for("generator", model=str(d / "Llama-3.1-8B-Instruct"), max_new_tokens=512, dtype="bfloat16")
    gpus = parse_inventory_spec("1xH100")
    p = plan(spec, gpus, 8, 60 + 512, "generator")
    planned_gpu = gpu_device(gpus[0])
    job_gpu = gpu_device({"name": "NVIDIA H100 80GB HBM3", "total_bytes": 81559 * 2**20})
    model, _ = load_causal_lm(spec_for("generator", model=str(ROOT / "models" / "demo-generator")))
    decided = {}
    for n in (20, 5000):
        reqs = [Requests(n, 60, 512)]
        planned, _ = planned_engine(spec, ModelNumbers.from_plan(p), planned_gpu, Layout("one", 1), reqs)
        job, why = use_compile(spec, model, lambda: p, reqs, device=job_gpu)
        assert job == planned.compiled, why
        decided[n] = job
    assert decided == {20: False, 5000: True}
    assert use_compile(spec, model, lambda: p, [Requests(5000, 60, 512)]) == (
        False,
        "compile: auto compiles on CUDA GPUs only",
    )


def test_the_plan_shows_the_batch_a_job_remembered_on_this_kind_of_gpu(study, tmp_path):
    """A generator job on an H100 (torch's name) remembered batch 100; the plan for `--gpus 4xH100` (the
    table's name) finds it, prints it and counts no probes."""
    from genjudge.config.specs import GeneratorSpec
    from genjudge.engine.batch_size import entry_of, memory_key
    from genjudge.planning.batch_choice import Choice
    from genjudge.store.batch_memory import BatchMemory

    _, cfg = study
    cfg = {**cfg, "cache_dir": str(tmp_path)}
    config, exp, e = generator_entry(cfg)
    assert "remembered" not in e.plan["batch_source"] and not e.engine.compiled
    spec = GeneratorSpec.from_config(exp.generators[e.name])
    key = memory_key(spec, "fingerprint", False, e.prompt_tokens, [["NVIDIA H100 80GB HBM3", 81559]])
    BatchMemory(tmp_path).remember(key, entry_of(Choice(100, "memory", "batch 100"), spec.model, 80e9, 131_072, 572))
    _, _, e = generator_entry(cfg)
    assert e.batch == 100 and "remembered from an earlier job" in e.plan["batch_source"]
    assert e.times["gsm8k"].term("batch search") == 0


def test_a_hosted_generator_gets_no_engine_advice_and_cpu_jobs_say_so(tmp_path):
    """A local demo generator beside gpt-4o-mini behind api.openai.com, planned for this machine (no GPUs):
    the advice and the written overlay leave the hosted model's engine alone, and count no GPU."""
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": "q?", "answer": "x"}) + "\n" for i in range(6)))
    hosted = {
        "model": "gpt-4o-mini-2024-07-18",
        "engine": "openai",
        "endpoint": {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"},
    }
    cfg = {
        "run": "mixed",
        "shards": 2,
        "dataset": {"path": str(data)},
        "generators": {"local": {"model": str(ROOT / "models/demo-generator")}, "mini": hosted},
        "judge": {"model": str(ROOT / "models/demo-judge")},
    }
    overlay = tmp_path / "overlay.yaml"
    out, _ = plan_lines(cfg, None, write=str(overlay), allow_result_changes=True)
    advice = out[out.index("advice (") :]
    assert "on the CPU" in advice and "GPU(s)" not in advice, advice
    written = yaml.safe_load(overlay.read_text())
    assert "mini" not in (written.get("generators") or {}), written
    assert "generators mini" not in advice
