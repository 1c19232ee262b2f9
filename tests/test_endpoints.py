"""engine: openai against real servers: vLLM's OpenAI-compatible server on loopback serving the demo
generator and the demo judge, with a loopback proxy in front that checks the key, injects faults with a
fixed seed and counts what each item was sent and answered (tests/endpoints.py).

Greedy answers and verdicts through the endpoint are the in-process vLLM engine's; a run whose requests
fail one in five ends with the clean run's verdicts, each item stored once; a killed run resends only
what was not stored; a budget stops a run part-way and a larger one finishes it without a repeated
request; the key reaches no file of the run."""

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path

import pandas as pd
import psutil
import pytest
from conftest import Workflow, clean_env, generate_shard, new_workflow, planned_jobs
from endpoints import CAUSE, FaultProxy, item_of, shared_servers
from judges import ROOT, judge_with

from genjudge.cluster.gpu_lease import Lease
from genjudge.config.experiment import Cell
from genjudge.config.specs import spec_for
from genjudge.data.dataset import load_items
from genjudge.data.shard_files import write_shard
from genjudge.engine.endpoint.probe import PROBE_TEXT
from genjudge.judging import modes
from genjudge.store.item_store import ItemStore

pytestmark = [pytest.mark.workflow, pytest.mark.vllm, pytest.mark.servers]

GENERATOR = "models/demo-generator"
JUDGE = "models/demo-judge"
KEY = "sk-genjudge-test-sentinel-7c1e9b"  # the API key: must reach no file of a run
N = 44  # the demo's questions


def probe_request(body) -> bool:
    return PROBE_TEXT in json.dumps(body)


@pytest.fixture(scope="module")
def servers():
    """vLLM's OpenAI server for each demo model (tests/endpoints.py shared_servers: one per model for
    the pytest run, about 75 s each to start on 2 cores); GENJUDGE_TEST_SERVERS=GEN_URL,JUDGE_URL uses
    servers already running, to work on these tests without waiting for them each time."""
    return shared_servers(GENERATOR, JUDGE)


@pytest.fixture(scope="module")
def wf(tmp_path_factory, built_models) -> Workflow:
    return new_workflow(tmp_path_factory.mktemp("endpoints"), built_models)


def endpoint(proxy, **extra) -> dict:
    return {"engine": "openai", "endpoint": {"base_url": proxy.url, **extra}}


def study(wf, name, gen_proxy, judge_proxy, *, judge_endpoint=None, gen_endpoint=None, **overrides):
    """A config of the demo study with the generator and two judges (verdicts written, and logprob
    verdicts with a prefilled marker) behind the proxies; its own run and item cache."""
    judge_endpoint = {"api_key_env": "GENJUDGE_TEST_KEY", **(judge_endpoint or {})}
    gen_endpoint = {"api_key_env": "GENJUDGE_TEST_KEY", **(gen_endpoint or {})}
    cfg = {
        "run": name,
        "shards": 1,
        "cache_dir": f"results/.cache-{name}",
        "generator": {"model": GENERATOR, **endpoint(gen_proxy, **gen_endpoint)},
        "judges": {
            "written": {"model": JUDGE, **endpoint(judge_proxy, **judge_endpoint)},
            "logprob": {"model": JUDGE, "verdict": "logprob", **endpoint(judge_proxy, prefill=True, **judge_endpoint)},
        },
        **overrides,
    }
    return wf.write_config(f"{name}.yaml", **cfg)


def run(wf, cfg, *targets, key=KEY, check=True, extra=(), **env):
    return wf.run(
        *targets, "--cores", "2", "--configfile", cfg, *extra, env=clean_env(GENJUDGE_TEST_KEY=key, **env), check=check
    )


def raw(wf, name, judge):
    return pd.read_parquet(wf.results(name) / "judge" / judge / "raw.parquet").sort_values("id", ignore_index=True)


def meta(wf, name, judge):
    return json.loads((wf.results(name) / "judge" / judge / "raw.meta.json").read_text())


@pytest.fixture(scope="module")
def clean(wf, servers, tmp_path_factory):
    """The study through proxies that inject nothing and accept only the key, run with torch and
    transformers unimportable (test_endpoint_jobs_import_no_torch reads its output)."""
    blocked = tmp_path_factory.mktemp("blocked")
    for name in ("torch", "transformers"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(f"raise ImportError('{name} is blocked in this test')\n")
    gen, judge = servers
    proxies = FaultProxy(gen.url, key=KEY), FaultProxy(judge.url, key=KEY)
    cfg = study(wf, "clean", *proxies, report={"export": ["eee"]})  # the export too: no file may hold the key
    # The blocker first; the path the suite runs with (a checkout's own src/) after it.
    out = run(wf, cfg, PYTHONPATH=os.pathsep.join(filter(None, [str(blocked), os.environ.get("PYTHONPATH")])))
    yield cfg, proxies, out
    for p in proxies:
        p.stop()


# --- the endpoint's results are the in-process engine's -------------------------------------------


FIELDS = {"id": "id", "prompt": "question", "reference": "answer", "category": "category"}


def shard_of_demo(tmp_path) -> pd.DataFrame:
    """The demo questions, a chat conversation with a system message and a two-turn item, as one shard."""
    items = load_items(ROOT / "config/demo/questions.jsonl", FIELDS)
    chat = tmp_path / "chat.jsonl"
    conversation = [
        {"role": "system", "content": "Answer with one word."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris"},
        {"role": "user", "content": "What is the capital of Peru?"},
    ]
    chat.write_text(json.dumps({"id": "chat", "messages": conversation, "answer": "Lima"}) + "\n")
    chats = load_items(chat, {"id": "id", "prompt": "messages", "reference": "answer", "category": None})
    turns = tmp_path / "turns.jsonl"
    turns.write_text(json.dumps({"id": "mt", "turns": ["What is 2 + 3?", "Now multiply that by 4."]}) + "\n")
    multi = load_items(turns, {"id": "id", "prompt": "turns", "reference": None, "category": None})
    items = pd.concat([items, chats, multi], ignore_index=True)
    write_shard(tmp_path / "0.jsonl", items)
    return items


VLLM = {"engine": "vllm", "dtype": "float32", "vllm": {"enforce_eager": True}}


def test_greedy_answers_and_verdicts_equal_the_in_process_vllm_engines(tmp_path, servers):
    gen, judge = servers
    shard_of_demo(tmp_path)
    # The server knows the model by the path it was started with, relative to the repository.
    ep = spec_for("generator", model=GENERATOR, max_new_tokens=24, **endpoint(gen, api_key_env=None))
    ours, _ = generate_shard(tmp_path, ep, "ep", "s1")
    theirs, _ = generate_shard(
        tmp_path, spec_for("generator", model=str(ROOT / GENERATOR), max_new_tokens=24, **VLLM), "vl", "s2"
    )
    cols = ["id", "turn", "output", "n_prompt_tokens", "n_generated_tokens", "finish_reason"]
    pd.testing.assert_frame_equal(ours[cols], theirs[cols])
    assert len(ours) == N + 3  # the chat item, and both turns of the two-turn item
    assert ours["prompt_sent"].map(lambda p: json.loads(p)[-1]["role"]).eq("user").all()
    # The second turn went out with the first turn's answer as history; the chat with its own system message.
    second = json.loads(ours.set_index(["id", "turn"]).loc[("mt", 2), "prompt_sent"])
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"] == ours.set_index(["id", "turn"]).loc[("mt", 1), "output"]
    assert json.loads(ours.set_index("id").loc["chat", "prompt_sent"])[0]["role"] == "system"
    theirs = theirs[theirs["id"].str.match(r"^[a-z]+-\d+$")]  # the judge below grades the demo's questions

    gens = tmp_path / "gens.parquet"
    demo = pd.read_json(ROOT / "config/demo/questions.jsonl", lines=True, dtype=False)
    demo.rename(columns={"question": "prompt", "answer": "reference"}).merge(
        theirs[["id", "output", "n_generated_tokens", "finish_reason"]], on="id"
    ).to_parquet(gens)
    cells = [Cell("g", "d")]
    template = ROOT / "config/demo/judge_template.txt"

    def judged(name, **kw):
        model = JUDGE if kw["engine"] == "openai" else str(ROOT / JUDGE)
        spec = spec_for("judge", model=model, max_new_tokens=16, **kw)
        judge_with(
            cells=cells,
            generations={("g", "d"): str(gens)},
            out_path=tmp_path / f"{name}.parquet",
            meta_path=tmp_path / f"{name}.meta.json",
            spec=spec,
            template_path=template,
            store_dir=tmp_path / f"store-{name}",
            run="t",
            lease=Lease([], "none"),
            log_stream=io.StringIO(),
        )
        return pd.read_parquet(tmp_path / f"{name}.parquet"), json.loads((tmp_path / f"{name}.meta.json").read_text())

    a, am = judged("ep", **endpoint(judge, api_key_env=None))
    b, _ = judged("vl", **VLLM)
    assert a["judge_output"].tolist() == b["judge_output"].tolist()
    assert (a["judge_n_prompt_tokens"] == b["judge_n_prompt_tokens"]).all()
    assert am["engine"] == "openai" and am["endpoint"]["completed"] == N and am["endpoint"]["retries"] == {}
    lp, lm = judged("lp", verdict="logprob", **endpoint(judge, api_key_env=None, prefill=True))
    lv, _ = judged("lv", verdict="logprob", **VLLM)
    assert lp["judge_output"].tolist() == lv["judge_output"].tolist()
    assert (lp["p_correct"] - lv["p_correct"]).abs().max() < 1e-5
    assert lm["endpoint"]["probe"]["served_model"] == JUDGE


# --- a run through the workflow -------------------------------------------------------------------


def test_an_endpoint_study_runs_without_gpus_and_records_what_it_sent(wf, clean):
    cfg, (gen_proxy, judge_proxy), _ = clean
    for judge_name in ("written", "logprob"):
        judged = pd.read_parquet(wf.results("clean") / "judgments" / f"{judge_name}.parquet")
        assert len(judged) == N and judged["verdict"].notna().all(), judge_name
    m = meta(wf, "clean", "logprob")
    e = m["endpoint"]
    assert m["engine"] == "openai" and m["gpus"] == [] and m["gpu_source"] == "none"
    assert e["requests"] - e["probe_requests"] == e["completed"] == N and e["retries"] == {} and e["given_up"] == {}
    assert e["served_models"] == {JUDGE: N} and sum(e["system_fingerprints"].values()) == N
    # One token per verdict, and the capability probe's one.
    assert e["base_url"] == judge_proxy.url and e["prompt_tokens"] > 0 and e["completion_tokens"] == N + 1
    # Every request carried the key; none reached the server without it.
    assert set(judge_proxy.auth_seen) == {"Bearer "} and set(gen_proxy.auth_seen) == {"Bearer "}
    # The report shows each endpoint job: requests, results, retries, tokens, cost, requests per second.
    summary = json.loads((wf.results("clean") / "report" / "summary.json").read_text())
    rows = {r["job"]: r for r in summary["endpoints"]}
    assert set(rows) == {"generate demo-generator/questions/0", "judge written/0", "judge logprob/0"}
    assert rows["judge logprob/0"]["completed"] == N and rows["judge logprob/0"]["requests_per_second"] > 0
    md = (wf.results("clean") / "report" / "report.md").read_text()
    assert "## Endpoints" in md and "| judge logprob/0 | models/demo-judge at http://127.0.0.1:" in md
    # A model behind an endpoint is described by where it is served, not by a local model's precision and GPUs;
    # the Endpoints table ends with what the jobs cost over all attempts.
    assert "verdict logprob, behind http://127.0.0.1:" in md and "served as models/demo-judge" in md
    assert "quantization none, GPUs none (CPU)" not in md and "parameters per device: null" not in md
    assert "Over all attempts: no price known;" in md
    html = (wf.results("clean") / "report" / "report.html").read_text()
    assert '<section id="endpoints">' in html and "judge logprob/0" in html
    gens = pd.read_parquet(wf.results("clean") / "generations" / "demo-generator" / "questions.parquet")
    assert gens["output"].notna().all() and (gens["n_generated_tokens"] > 0).all()
    # Nothing to do on a second run: the endpoint is part of the rerun params, the key is not.
    dry = wf.run("-n", "--configfile", cfg, env=clean_env(GENJUDGE_TEST_KEY="another-key"))
    assert "Nothing to be done" in dry.stdout
    # The endpoint's URL is part of each result's key: another URL reruns the endpoint jobs (that alone:
    # the GPU inventory given with it is no rerun param).
    moved = wf.run(
        "-n",
        "--configfile",
        cfg,
        "--config",
        'generator={"endpoint": {"base_url": "http://127.0.0.1:9/v1"}}',
        "gpu_inventory=[0,1]",
    )
    assert "generate" in moved.stdout and "Nothing to be done" not in moved.stdout
    reason = re.search(r"^rule generate:\n(?:\s+\w+: .*\n)*?\s+reason: (.*)$", moved.stdout, re.M).group(1)
    assert "http://127.0.0.1:9/v1" in reason and "gpu" not in reason, reason
    # With GPUs to lease, the endpoint jobs still ask none: `--resources gpu=N` never holds them back.
    for rule in ("generate", "judge"):
        block = moved.stdout[moved.stdout.index(f"rule {rule}:") :]
        resources = re.search(r"resources: (.*)", block).group(1)
        assert "gpu=0" in resources and "mem_mb=4000" in resources and "runtime=240" in resources, resources


def test_endpoint_jobs_import_no_torch(wf, clean):
    """The whole study, model jobs included, runs with torch and transformers unimportable: the clean
    run (both judges, the generator, the model-free jobs) ran with PYTHONPATH holding packages of those
    names that raise on import."""
    *_, out = clean
    assert "is blocked" not in out.stderr
    for judge_name in ("written", "logprob"):
        assert meta(wf, "clean", judge_name)["endpoint"]["completed"] == N, judge_name
    assert (wf.results("clean") / "report" / "summary.json").exists()


# --- faults, kills, budgets, secrets ----------------------------------------------------------------


def stored_keys(store_dir: Path) -> Counter:
    """How many records each key has in an item store's logs (a second record would be a duplicate)."""
    counts: Counter = Counter()
    for log in (store_dir / "logs").glob("*.jsonl"):
        for line in log.read_text().splitlines()[1:]:
            if line.strip():
                counts[json.loads(line)["key"]] += 1
    return counts


def test_one_request_in_five_faulted_ends_with_the_clean_runs_results_each_item_stored_once(wf, servers, clean):
    gen, judge = servers
    spare = probe_request
    gp = FaultProxy(
        gen.url, rate=0.2, seed=11, timeout_delay=6, spare=spare, faults=[f for f in CAUSE if f != "strip_logprobs"]
    )
    jp = FaultProxy(judge.url, rate=0.2, seed=12, timeout_delay=6, spare=spare)
    try:
        settings = {"timeout": 4, "max_connections": 8}
        cfg = study(wf, "faults", gp, jp, judge_endpoint=settings, gen_endpoint=settings)
        run(wf, cfg, *(f"results/faults/judge/{j}/raw.parquet" for j in ("written", "logprob")))  # what it reads
    finally:
        gp.stop()
        jp.stop()
    assert sum(jp.injected.values()) >= 10 and len(jp.injected) >= 5, jp.injected
    for judge_name in ("written", "logprob"):
        a, b = raw(wf, "faults", judge_name), raw(wf, "clean", judge_name)
        assert a["judge_output"].tolist() == b["judge_output"].tolist()
        assert a["p_correct"].fillna(-1).round(9).tolist() == b["p_correct"].fillna(-1).round(9).tolist()
    a = pd.read_parquet(wf.results("faults") / "generations" / "demo-generator" / "questions.parquet")
    b = pd.read_parquet(wf.results("clean") / "generations" / "demo-generator" / "questions.parquet")
    assert a["output"].tolist() == b["output"].tolist()
    # Each item stored once, and answered in full by the server at most once.
    for sub in ("judge", "generations"):
        counts = stored_keys(wf.path / "results" / ".cache-faults" / sub)
        assert counts and set(counts.values()) == {1}, sub
    for proxy in (gp, jp):
        assert max(proxy.answered.values()) == 1
    # The log and the meta count every retry by its cause: exactly the faults the proxy injected.
    retries = Counter()
    for judge_name in ("written", "logprob"):
        retries.update(meta(wf, "faults", judge_name)["endpoint"]["retries"])
    assert retries == Counter({CAUSE[f]: n for f, n in jp.injected.items()})
    gen_meta = json.loads((wf.results("faults") / "generations/demo-generator/questions/0.meta.json").read_text())
    assert Counter(gen_meta["endpoint"]["retries"]) == Counter({CAUSE[f]: n for f, n in gp.injected.items()})
    log = (wf.path / "logs" / "faults" / "judge" / "logprob" / "0-of-1.log").read_text()
    assert log.count("retry in") == sum(meta(wf, "faults", "logprob")["endpoint"]["retries"].values())


def ids_of(records: dict) -> set:
    return {r["id"] for r in records.values()}


def judging_clean(wf, clean, name, judge, cache_dir) -> Path:
    """A config `name` of the clean run with `judge` as its one judge: on a copy of the module's
    workflow (Workflow.copy: Snakemake's records kept, the generation finished) a run of it judges the
    clean run's answers and generates nothing."""
    _, (gen_proxy, _), _ = clean
    return wf.write_config(
        f"{name}.yaml",
        run="clean",
        shards=1,
        cache_dir=cache_dir,
        generator={"model": GENERATOR, **endpoint(gen_proxy, api_key_env="GENJUDGE_TEST_KEY")},
        judge=judge,
    )


RAW = "results/clean/judge/demo-judge/raw.parquet"  # a judge run on a copy stops at what it reads


def test_a_killed_run_resends_only_what_it_had_not_stored(wf, servers, clean, tmp_path):
    _, judge = servers
    jp = FaultProxy(judge.url, delay=0.3, spare=probe_request)
    try:
        wf = wf.copy(tmp_path)
        judge_spec = {"model": JUDGE, **endpoint(jp, max_connections=2)}
        cfg = judging_clean(wf, clean, "resume", judge_spec, "results/.cache-resume")
        store = wf.path / "results" / ".cache-resume" / "judge"
        proc = subprocess.Popen(
            [sys.executable, "-m", "snakemake", RAW, "--cores", "2", "--configfile", str(cfg)],
            cwd=wf.path,
            env=clean_env(GENJUDGE_TEST_KEY=KEY),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 600
        while ItemStore(store, "t").load() is None or len(ItemStore(store, "t").load()) < 10:
            assert proc.poll() is None and time.monotonic() < deadline, "the judge finished before it could be killed"
            time.sleep(0.05)
        for child in psutil.Process(proc.pid).children(recursive=True):
            if any("judge.py" in part for part in child.cmdline()):
                child.send_signal(signal.SIGKILL)
        killed = proc.communicate(timeout=300)[0]
        assert "generate" not in planned_jobs(subprocess.CompletedProcess([], 0, killed, ""))  # judged the copy's
        first = ItemStore(store, "t").load()
        assert 10 <= len(first) < N
        jp.settle()  # the killed job's requests in flight are answered before the counts start again
        sent_before = set(jp.requests)
        jp.reset()
        run(wf, cfg, RAW)
    finally:
        jp.stop()
    rows = raw(wf, "clean", "demo-judge")
    item = {i: item_of({"messages": json.loads(p)}) for i, p in zip(rows["id"], rows["judge_prompt"])}
    stored_first = {item[i] for i in ids_of(first)}
    resent = set(jp.requests) - {k for k in jp.requests if k not in item.values()}  # the probe is no item
    assert resent and not resent & stored_first
    assert resent | stored_first == set(item.values()) and len(sent_before) >= len(stored_first)
    assert max(jp.answered.values()) == 1


def test_a_budget_stops_a_run_part_way_and_a_larger_one_finishes_it_without_repeating_a_request(
    wf, servers, clean, tmp_path
):
    _, judge = servers
    jp = FaultProxy(judge.url, spare=probe_request)
    price = {"input_per_mtok": 100.0, "output_per_mtok": 100.0}
    try:
        wf = wf.copy(tmp_path)

        def budget(usd):
            judge_spec = {"model": JUDGE, **endpoint(jp, max_connections=1), "price": price, "max_cost_usd": usd}
            return judging_clean(wf, clean, "budget", judge_spec, "results/.cache-budget")

        small = budget(0.08)
        out = run(wf, small, check=False)
        assert out.returncode == 1 and "generate" not in planned_jobs(out)  # judged the copy's answers
        m = meta(wf, "clean", "demo-judge")
        e = m["endpoint"]
        assert e["budget_stopped"] and 0 < e["completed"] < N and e["not_sent"] == N - e["completed"]
        assert e["cost_usd"] <= 0.08
        summary = json.loads((wf.results("clean") / "report" / "summary.json").read_text())
        assert len(summary["failed_cells"]) == 1, summary["failed_cells"]
        cell = summary["failed_cells"][0]
        assert cell["errors"][0]["type"] == "BudgetReached" and "max_cost_usd" in cell["errors"][0]["message"]
        report = (wf.results("clean") / "report" / "report.md").read_text()
        assert "stopped by max_cost_usd: " in report and "item(s) left without a verdict" in report
        rows = json.loads((wf.results("clean") / "report" / "summary.json").read_text())["endpoints"]
        (row,) = [r for r in rows if r["job"] == "judge demo-judge/0"]
        assert row["budget_stopped"] and row["cost_usd"] == e["cost_usd"] and row["not_sent"] == e["not_sent"]
        assert "of $0.0800: **budget reached**" in report
        stored = len(ItemStore(wf.path / "results/.cache-budget/judge", "t").load())
        assert stored == e["completed"]
        # The same budget again sends nothing: what the first attempt paid counts against it.
        again = run(wf, small, check=False)
        assert again.returncode == 1 and sum(jp.requests.values()) == e["completed"] + 1  # + the probe
        run(wf, budget(1), RAW)  # what it reads: the raw verdicts and their meta
    finally:
        jp.stop()
    rows = raw(wf, "clean", "demo-judge")
    items = {item_of({"messages": json.loads(p)}) for p in rows["judge_prompt"]}
    assert len(items) == N and all(jp.requests[k] == 1 for k in items)  # each item requested once in all
    # and one capability probe: the larger budget's run skips the one its earlier attempt passed
    assert sum(jp.requests.values()) == N + 1
    done = meta(wf, "clean", "demo-judge")["endpoint"]
    assert done["completed"] == N - e["completed"] and not done["budget_stopped"]
    assert done["cost_usd_earlier_attempts"] == pytest.approx(e["cost_usd"], abs=1e-6)


def test_the_key_reaches_no_file_of_a_run_nor_an_error(wf, servers, clean, tmp_path):
    cfg, *_ = clean
    wf.run("--report", "endpoint-report.zip", "--configfile", cfg, env=clean_env(GENJUDGE_TEST_KEY=KEY))
    exported = list((wf.results("clean") / "export" / "eee" / "data").rglob("*_samples.jsonl"))
    assert len(exported) == 2  # the generator's cells of both judges, searched with the rest below
    model = json.loads(exported[0].with_name(exported[0].name.replace("_samples.jsonl", ".json")).read_text())
    details = model["model_info"]["additional_details"]  # the endpoint's model as it answered
    assert details["deployment_type"] == "externally_managed" and json.loads(details["served_model_ids"])
    hits = []
    for root in ("results", "logs", ".snakemake"):
        for path in (wf.path / root).rglob("*"):
            if path.is_file() and KEY.encode() in path.read_bytes():
                hits.append(str(path))
    with zipfile.ZipFile(wf.path / "endpoint-report.zip") as zf:
        hits += [n for n in zf.namelist() if KEY.encode() in zf.read(n)]
    assert hits == []
    # A refused key: the job stops before its requests, naming the variable, and the error holds no key.
    _, judge = servers
    wrong = "sk-wrong-key-4d2a"
    jp = FaultProxy(judge.url, key=KEY)
    try:
        wf = wf.copy(tmp_path)
        judge_spec = {"model": JUDGE, **endpoint(jp, api_key_env="GENJUDGE_TEST_KEY")}
        bad = judging_clean(wf, clean, "badkey", judge_spec, "results/.cache-clean")
        out = run(wf, bad, key=wrong, check=False)
    finally:
        jp.stop()
    assert out.returncode == 1 and "generate" not in planned_jobs(out)  # judged the copy's answers
    summary = json.loads((wf.results("clean") / "report" / "summary.json").read_text())
    message = summary["failed_cells"][0]["errors"][0]["message"]
    assert "endpoint.api_key_env" in message and "GENJUDGE_TEST_KEY" in message
    for root in ("results/clean", "logs/clean"):
        for path in (wf.path / root).rglob("*"):
            assert not path.is_file() or wrong.encode() not in path.read_bytes(), path
    assert wrong not in out.stdout + out.stderr


def test_a_proxy_that_echoes_the_key_in_every_error_leaves_it_in_no_file(wf, servers, clean, tmp_path):
    """Every answer of the judge's endpoint, the capability probe's first, is a 502 that repeats the
    request's headers: the job fails, and the key is in no file of the run, no report and no output."""
    _, judge = servers
    jp = FaultProxy(judge.url, echo=True)
    try:
        wf = wf.copy(tmp_path)
        judge_spec = {"model": JUDGE, **endpoint(jp, api_key_env="GENJUDGE_TEST_KEY", max_attempts=2)}
        cfg = judging_clean(wf, clean, "echo", judge_spec, "results/.cache-clean")
        out = run(wf, cfg, check=False)
        report = wf.run("--report", "echo-report.zip", "--configfile", cfg, env=clean_env(GENJUDGE_TEST_KEY=KEY))
    finally:
        jp.stop()
    assert out.returncode == 1 and report.returncode == 0
    summary = json.loads((wf.results("clean") / "report" / "summary.json").read_text())
    message = summary["failed_cells"][0]["errors"][0]["message"]
    assert "did not answer the capability probe" in message and "[redacted]" in message
    hits = [
        str(p)
        for root in ("results", "logs", ".snakemake")
        for p in (wf.path / root).rglob("*")
        if p.is_file() and KEY.encode() in p.read_bytes()
    ]
    with zipfile.ZipFile(wf.path / "echo-report.zip") as zf:
        hits += [n for n in zf.namelist() if KEY.encode() in zf.read(n)]
    assert hits == [] and KEY not in out.stdout + out.stderr


def test_a_prompt_too_long_for_the_servers_context_is_its_items_too_long_case(tmp_path, servers):
    """The server's context-length refusal (HTTP 400) is not retried: the dataset's on_too_long decides."""
    from judges import generate_with

    from genjudge.data.shard_files import write_shard
    from genjudge.errors import InputError

    gen, _ = servers
    proxy = FaultProxy(gen.url)
    try:
        rows = [{"id": "short", "question": "What is 2 + 3?", "answer": "5"}]
        rows.append({"id": "long", "question": "Count the words: " + "word " * 3000, "answer": "3000"})
        data = tmp_path / "d.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        write_shard(tmp_path / "0.jsonl", load_items(data, {**FIELDS, "category": None}))
        spec = spec_for("generator", model=GENERATOR, max_new_tokens=16, **endpoint(proxy))

        def generate(name, on_too_long):
            generate_with(
                shard=0,
                shard_path=tmp_path / "0.jsonl",
                out_path=tmp_path / f"{name}.parquet",
                meta_path=tmp_path / f"{name}.meta.json",
                spec=spec,
                store_dir=tmp_path / f"store-{name}",
                run="t",
                lease=Lease([], "none"),
                log_stream=io.StringIO(),
                on_too_long=on_too_long,
            )
            return pd.read_parquet(tmp_path / f"{name}.parquet").set_index("id")

        out = generate("skip", "skip")
        assert out.loc["short", "output"] and pd.isna(out.loc["short", "skipped"])
        assert pd.isna(out.loc["long", "output"]) and "maximum context length" in out.loc["long", "skipped"]
        long_item = item_of({"messages": [{"role": "user", "content": rows[1]["question"]}]})
        assert proxy.requests[long_item] == 1  # refused once, never retried
        with pytest.raises(InputError, match=r"item 'long' is too long for models/demo-generator .*maximum context"):
            generate("fail", "fail")
    finally:
        proxy.stop()


def test_each_judges_budget_counts_its_own_earlier_attempts_only(tmp_path, servers):
    """Two judges of a run share the item store: what one paid is no earlier attempt of the other's."""
    _, judge = servers
    demo = pd.read_json(ROOT / "config/demo/questions.jsonl", lines=True, dtype=False).head(8)
    gens = tmp_path / "gens.parquet"
    demo.rename(columns={"question": "prompt", "answer": "reference"}).assign(output="4").to_parquet(gens)
    price = {"input_per_mtok": 10.0, "output_per_mtok": 10.0}
    spec = spec_for("judge", model=JUDGE, max_new_tokens=16, price=price, max_cost_usd=1, **endpoint(judge))

    def judged(name):
        judge_with(
            cells=[Cell("g", "d")],
            generations={("g", "d"): str(gens)},
            out_path=tmp_path / f"{name}.parquet",
            meta_path=tmp_path / f"{name}.meta.json",
            spec=spec,
            template_path=ROOT / "config/demo/judge_template.txt",
            store_dir=tmp_path / "store",
            run="t",
            lease=Lease([], "none"),
            log_stream=io.StringIO(),
            judge_name=name,
        )
        return json.loads((tmp_path / f"{name}.meta.json").read_text())["endpoint"]

    first, second = judged("a"), judged("b")
    assert first["completed"] == 8 and first["cost_usd"] > 0
    # b's requests are a's (one cache): it sends nothing, and a's cost is not its own earlier spending.
    assert second["completed"] == 0 and second["cost_usd_earlier_attempts"] == 0
    assert judged("a")["cost_usd_earlier_attempts"] == pytest.approx(first["cost_usd"])  # a again: its own


def test_the_endpoint_bench_runs_in_quick_mode(servers, tmp_path):
    """bench/endpoint_bench.py's quick mode against this module's judge server (tests/test_benches.py runs
    every other bench's)."""
    _, judge = servers
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "endpoint_bench.py"), "--quick", "--server", judge.url],
        cwd=tmp_path,
        env=clean_env(PYTHONPATH=str(ROOT / "src")),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "identical verdicts 16/16" in proc.stdout and "target(s) not judged" in proc.stdout
    assert list(tmp_path.iterdir()) == []


def test_score_pairwise_and_cascade_judges_through_the_endpoint(tmp_path, servers):
    """The grading modes build their requests as for a local judge; the endpoint answers each (pairwise
    in both orders), and the cascade's rule decisions send nothing."""
    _, judge = servers
    demo = pd.read_json(ROOT / "config/demo/questions.jsonl", lines=True, dtype=False).head(6)
    gens = demo.rename(columns={"question": "prompt", "answer": "reference"})
    mine, theirs = tmp_path / "mine.parquet", tmp_path / "theirs.parquet"
    gens.assign(output=gens["reference"]).to_parquet(mine)  # right answers: the cascade decides them all
    gens.assign(output="I do not know").to_parquet(theirs)
    proxy = FaultProxy(judge.url)

    def judged(name, cell, **kw):
        spec = spec_for("judge", model=JUDGE, max_new_tokens=8, **endpoint(proxy), **kw)
        judge_with(
            cells=[cell],
            generations={("g", "d"): str(mine), ("h", "d"): str(theirs)},
            out_path=tmp_path / f"{name}.parquet",
            meta_path=tmp_path / f"{name}.meta.json",
            spec=spec,
            template_path=ROOT / modes.get(spec.mode).default_template(),
            store_dir=tmp_path / f"store-{name}",
            run="t",
            lease=Lease([], "none"),
            log_stream=io.StringIO(),
        )
        return pd.read_parquet(tmp_path / f"{name}.parquet")

    try:
        score = judged("score", Cell("g", "d"), mode="score")
        assert len(score) == 6 and score["judge_output"].notna().all() and (score["decided_by"] == "judge").all()
        pair = judged("pair", Cell("g", "d", "h"), mode="pairwise", baseline="h")
        assert sorted(pair["order"].value_counts().items()) == [(0, 6), (1, 6)]
        both = pair.pivot(index="id", columns="order", values="judge_prompt")
        assert (both[0] != both[1]).all()  # each order its own request
        sent = sum(proxy.requests.values())
        cascade = judged("cascade", Cell("g", "d"), cascade=True)
        assert (cascade["decided_by"] == "rule").all() and sum(proxy.requests.values()) == sent
    finally:
        proxy.stop()


def test_sampled_answers_through_the_endpoint_are_seeded_per_sample(tmp_path, servers):
    """Each sample carries its own seed: two runs from empty stores give the same samples, and an item's
    samples differ. The capability probe checked that the server honours `seed` first."""
    gen, _ = servers
    shard_of_demo(tmp_path)
    spec = spec_for(
        "generator",
        model=GENERATOR,
        max_new_tokens=12,
        do_sample=True,
        temperature=2.0,
        n_samples=2,
        seed=7,
        **endpoint(gen),
    )
    a, meta = generate_shard(tmp_path, spec, "a", "sa")
    b, _ = generate_shard(tmp_path, spec, "b", "sb")
    assert meta.endpoint["probe"]["served_model"] == GENERATOR
    pd.testing.assert_series_equal(a["output"], b["output"])
    # The samples of an item are not one text. Temperature 2 (the API's highest): at 1.3 the demo model
    # drew one text for most items, and how many follow the seeds, which follow each request's key, the
    # server's URL (a new port each run) among it: 9 of 44 in one run. At 2, 41 of 44; a seed shared by
    # an item's samples would give none.
    per_item = a[a["turn"] == 1].groupby("id")["output"].nunique()
    assert (per_item > 1).sum() >= 22, per_item.to_dict()
    assert a["key"].nunique() == len(a)  # each sample its own key


def test_items_no_retry_saves_fail_their_cell_and_the_rerun_sends_only_them(wf, servers, clean, tmp_path):
    """An item failing every try leaves its cell failed and listed, with every other verdict stored; the
    next run of the same command sends that item alone."""
    from genjudge.judging.templates import render

    _, judge = servers
    gens = pd.read_parquet(wf.results("clean") / "generations" / "demo-generator" / "questions.parquet")
    questions = {q["id"]: q for q in map(json.loads, (ROOT / "config/demo/questions.jsonl").read_text().splitlines())}
    template = (ROOT / "config/demo/judge_template.txt").read_text()
    doomed = set()  # the first two items' judge requests: answered 500 every time
    for row in gens.head(2).itertuples():
        q = questions[row.id]
        prompt = render(template, question=q["question"], reference=q["answer"], candidate=row.output)
        doomed.add(item_of({"messages": [{"role": "user", "content": prompt}]}))
    proxy = FaultProxy(judge.url, always=doomed)
    try:
        wf = wf.copy(tmp_path)  # the clean run's answers: only the judge works
        judge_spec = {"model": JUDGE, **endpoint(proxy, max_attempts=2, max_connections=4)}
        cfg = judging_clean(wf, clean, "unlucky", judge_spec, "results/.cache-clean")
        out = run(wf, cfg, check=False)
        assert out.returncode == 1 and "generate" not in planned_jobs(out)
        summary = json.loads((wf.results("clean") / "report" / "summary.json").read_text())
        (cell,) = summary["failed_cells"]
        error = cell["errors"][0]
        assert error["type"] == "EndpointIncomplete" and "2 item(s) got no verdict" in error["message"]
        assert "gave up after 2 tries" in error["message"] and "500" in error["message"]
        assert all(proxy.requests[k] == 2 for k in doomed) and sum(proxy.answered.values()) == N - 2 + 1
        doomed.clear()  # the server recovers
        proxy.reset()
        run(wf, cfg, "results/clean/judgments/demo-judge.parquet")  # what it reads
    finally:
        proxy.stop()
    # The rerun sent the two items, nothing else (the capability probe was passed by the first attempt).
    assert sum(proxy.requests.values()) == 2 and sum(proxy.answered.values()) == 2
    judged = pd.read_parquet(wf.results("clean") / "judgments" / "demo-judge.parquet")
    assert len(judged) == N and judged["verdict"].notna().all()
