"""`genjudge` follows the workflow's config and explains itself."""

import argparse
import os
import re
import subprocess
import sys
import time

from genjudge import cli


def genjudge(*args, **kw):
    # CUDA_VISIBLE_DEVICES limits the inventory `genjudge gpus` shows: never inherit a test's pinning.
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return subprocess.run([sys.executable, "-m", "genjudge.cli", *args], capture_output=True, text=True, env=env, **kw)


def test_every_option_has_help_text(monkeypatch):
    parsers = []
    real = argparse.ArgumentParser.parse_args

    def capture(self, *a, **k):
        parsers.append(self)
        raise SystemExit(0)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    try:
        cli.main(["summary", "x"])
    except SystemExit:
        pass
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", real)
    top = parsers[0]
    subs = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    missing = [
        f"{name} {a.option_strings or a.dest}"
        for name, p in subs.choices.items()
        for a in p._actions
        if not isinstance(a, argparse._HelpAction) and not a.help
    ]
    assert missing == []


def test_gpus_reads_the_configured_inventory_and_shows_lease_age(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom genjudge.cluster.gpu_lease import acquire\n"
            f"l = acquire(1, ['0', '1'], {str(tmp_path)!r}, label='run/generate/0')\n"
            "print('held', flush=True)\ntime.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        started = time.monotonic()
        assert holder.stdout.readline().strip() == "held"
        time.sleep(1.1)
        out = genjudge("gpus", "--config", "gpu_inventory=2", f"lock_dir={tmp_path}", check=True).stdout
        observed = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert "inventory (gpu_inventory: 2): 0, 1" in out
    m = re.search(
        r"GPU 0: .*since=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d job=run/generate/0 \(held (\d+)h(\d\d)m(\d\d)s\)", out
    )
    assert m, out
    # The age is what the code computed: at least the time slept after the lease was taken, and no more
    # than this test saw pass since before the holder started (whole seconds, rounded either way).
    age = 3600 * int(m.group(1)) + 60 * int(m.group(2)) + int(m.group(3))
    assert 1 <= age <= observed + 1, (age, observed)
    assert "GPU 1: free" in out
    # A count means the same as in the config: 4 GPUs, ids 0-3.
    assert "0, 1, 2, 3" in genjudge("gpus", "--inventory", "4", check=True).stdout


def test_sbatch_preview_shows_what_each_model_job_asks_for():
    out = genjudge(
        "plan",
        "--slurm",
        "--config",
        'slurm={"partition": "gpu", "account": "proj", "gpu_model": "a100"}',
        'judge={"shards": 2}',
        check=True,
    ).stdout.splitlines()
    generate, judge = [line for line in out if not line.startswith(" ")]  # then notes, indented
    assert "  job arrays: 4 generation jobs in arrays of up to 1000 tasks" in out[2]
    assert generate.startswith("generate (demo-generator, 4 job(s)): sbatch ")
    assert {"-A proj", "-p gpu", "-t 30", "--mem 4000", "--cpus-per-gpu=4", "--gpus=a100:1"} <= set(
        re.findall(r"-[A-Za-z] \S+|--[a-z-]+(?:=| )\S+", generate)
    )
    # Two judge shards share the node's 4 GPUs; each is an sbatch of its own, as the notes say too.
    assert "judge (demo-judge, 2 job(s))" in judge and "--gpus=a100:2" in judge and "--nodes=1" in judge
    assert "judge jobs are never arrays: one sbatch each" in out[2] and "single job" not in "\n".join(out)


def test_sbatch_preview_of_an_endpoint_judge_asks_no_gpu_and_its_own_resources():
    out = genjudge(
        "plan",
        "--slurm",
        "--config",
        'slurm={"gpu_model": "a100"}',
        'resources={"endpoint": {"mem_mb": 1500, "runtime": 7, "cpus": 2}}',
        'judges={"local": {}, "api": {"engine": "openai", "endpoint": {"base_url": "http://127.0.0.1:9/v1"}}}',
        check=True,
    ).stdout
    lines = {line.split(",", 1)[0]: line for line in out.splitlines() if line.startswith("judge (")}
    local, api = lines["judge (local"], lines["judge (api"]
    assert "--gpus=a100:4" in local and "--mem 8000" in local and "-t 60" in local
    # resources.endpoint's memory, time and threads; no --gpus=a100:0 from the role's GPU model.
    options = re.sub(r" -p \S+", "", api.split(": sbatch", 1)[1])  # the cluster's default partition, if any
    assert options.split() == ["-t", "7", "--mem", "1500", "--nodes=1", "--ntasks=1", "--cpus-per-task=2"], api
    # slurm.endpoint's placement goes to the endpoint jobs alone, over the role's.
    placed = genjudge(
        "plan",
        "--slurm",
        "--config",
        'slurm={"judge": {"partition": "gpu", "qos": "high"}, "endpoint": {"partition": "cpu"}}',
        'judges={"local": {}, "api": {"engine": "openai", "endpoint": {"base_url": "http://127.0.0.1:9/v1"}}}',
        check=True,
    ).stdout
    lines = {line.split(",", 1)[0]: line for line in placed.splitlines() if line.startswith("judge (")}
    assert " -p gpu " in lines["judge (local"] and " -p cpu " in lines["judge (api"]
    assert "--qos=high" in lines["judge (local"] and "--qos=high" in lines["judge (api"], lines


def test_configfile_takes_several_files_as_snakemake_does(tmp_path):
    (tmp_path / "a.yaml").write_text("gpu_inventory: 2\nlock_dir: /tmp\n")
    (tmp_path / "b.yaml").write_text("gpu_inventory: 3\n")
    out = genjudge("gpus", "--configfile", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), check=True).stdout
    assert "inventory (gpu_inventory: 3): 0, 1, 2; lock dir: /tmp" in out  # the later file wins, both are read


def test_train_demo_onto_an_existing_directory_is_one_line(tmp_path):
    proc = genjudge("train-demo", "demo-judge", str(tmp_path))
    assert proc.returncode == 1
    assert proc.stderr == f"error: {tmp_path} already exists; remove it or choose another directory\n"


def test_summary_into_a_closed_pipe_stops_without_a_traceback(tmp_path):
    """`genjudge summary results/x | head`: the reader closes the pipe early; here it is closed before the
    command writes, so every write meets it."""
    import os
    import subprocess
    import sys

    from test_report_numbers import C, W, judgments, summarise

    run, _, _ = summarise(judgments("a", [C, W] * 30), ["a"])
    (tmp_path / "report").mkdir()
    run.write(tmp_path / "report" / "summary.json")
    r, w = os.pipe()
    os.close(r)
    proc = subprocess.run(
        [sys.executable, "-m", "genjudge.cli", "summary", str(tmp_path)], stdout=w, stderr=subprocess.PIPE, text=True
    )
    os.close(w)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert proc.returncode == 141
