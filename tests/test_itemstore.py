"""The item store: durable, reusable across writers, torn writes never used, O(1) per item."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from genjudge.store.item_store import ItemStore, count_records

SRC = str(Path(__file__).resolve().parents[1] / "src")


def test_records_survive_and_a_torn_tail_is_never_used(tmp_path):
    store = ItemStore(tmp_path, "run-shard0")
    store.append([{"key": "a", "output": "1"}, {"key": "b", "output": "2"}])
    # A kill in the middle of a write leaves a partial last line in the writer's log.
    with open(store.log_path, "a") as fh:
        fh.write('{"key": "c", "outp')
    assert set(ItemStore(tmp_path, "run-shard0").load()) == {"a", "b"}
    resumed = ItemStore(tmp_path, "run-shard0")  # the job's rerun
    resumed.append([{"key": "c", "output": "3"}])
    assert {k: r["output"] for k, r in resumed.load().items()} == {"a": "1", "b": "2", "c": "3"}
    assert resumed.load({"c", "zz"}) == {"c": {"key": "c", "output": "3"}}
    assert count_records(tmp_path) == 3


def test_other_writers_records_are_reused(tmp_path):
    ItemStore(tmp_path, "run-shard0").append([{"key": "a", "output": "1"}])
    ItemStore(tmp_path, "run-shard1").append([{"key": "b", "output": "2"}])
    assert set(ItemStore(tmp_path, "other").load({"a", "b", "z"})) == {"a", "b"}


def test_a_later_record_of_a_key_wins(tmp_path):
    ItemStore(tmp_path, "run1").append([{"key": "a", "output": "old"}])
    ItemStore(tmp_path, "run2").append([{"key": "a", "output": "new"}])
    assert ItemStore(tmp_path, "x").load({"a"})["a"]["output"] == "new"


def test_a_record_whose_log_is_gone_is_not_reused_and_can_be_stored_again(tmp_path):
    first = ItemStore(tmp_path, "run-shard0")
    first.append([{"key": "a", "output": "1"}])
    first.close()
    first.log_path.unlink()
    assert ItemStore(tmp_path, "x").load({"a"}) == {}
    ItemStore(tmp_path, "run-shard0").append([{"key": "a", "output": "2"}])
    assert ItemStore(tmp_path, "x").load({"a"})["a"]["output"] == "2"


def test_one_writer_name_in_two_processes_never_shares_a_file(tmp_path):
    # A leftover job and its resubmission: same writer name, both alive, both appending.
    code = textwrap.dedent("""
        import sys
        from genjudge.store.item_store import ItemStore
        store = ItemStore(sys.argv[1], "demo-shard0")
        for b in range(50):
            store.append([{"key": f"{sys.argv[2]}{b}-{i}", "output": "x" * 200} for i in range(8)])
        print(store.log_path)
    """)
    env = {**os.environ, "PYTHONPATH": SRC}
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path), tag], stdout=subprocess.PIPE, text=True, env=env)
        for tag in ("old", "new")
    ]
    paths = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert paths[0] != paths[1]
    got = ItemStore(tmp_path, "reader").load()
    assert len(got) == 2 * 50 * 8
    assert all(r["output"] == "x" * 200 for r in got.values())


WRITER = textwrap.dedent("""
    import sys
    from genjudge.store.item_store import ItemStore
    store = ItemStore(sys.argv[1], "victim")
    b = 0
    while True:
        store.append([{"key": f"k{b}-{i}", "batch": b, "output": "y" * (100 + 37 * i)} for i in range(16)])
        print(b, flush=True)
        b += 1
""")


def test_sigkill_mid_write_loses_at_most_the_batch_being_written(tmp_path):
    env = {**os.environ, "PYTHONPATH": SRC}
    for trial in range(3):
        store_dir = tmp_path / f"s{trial}"
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store_dir)], stdout=subprocess.PIPE, text=True, env=env
        )
        done = -1
        deadline = time.monotonic() + 0.3 + 0.2 * trial
        while time.monotonic() < deadline:
            done = int(proc.stdout.readline())
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # The writer runs ahead of this loop: what it reported before the kill may still sit in the pipe.
        for line in proc.stdout:
            if line.endswith("\n"):
                done = int(line)
        got = ItemStore(store_dir, "reader").load()
        # Every batch the writer reported done is there, in full; nothing torn is returned.
        for b in range(done + 1):
            for i in range(16):
                assert got[f"k{b}-{i}"]["output"] == "y" * (100 + 37 * i)
        for key, rec in got.items():
            b, i = map(int, key[1:].split("-"))
            assert rec == {"key": key, "batch": b, "output": "y" * (100 + 37 * i)}
        assert len(got) <= (done + 2) * 16


def test_appends_and_lookups_do_not_read_the_rest_of_the_store(tmp_path, monkeypatch):
    """An append reads nothing and a lookup only its own keys' records, with 10,000 records stored as with
    200; neither lists a directory. Counted (bytes the process read, directory scans), not timed: the
    times are bench/store_bench.py's."""
    import threading

    me, scans = threading.get_ident(), []

    def spy(real, name):
        def listed(*args):
            if threading.get_ident() == me:  # not another thread of the worker's
                scans.append(name)
            return real(*args)

        return listed

    for name in ("scandir", "listdir"):
        monkeypatch.setattr(os, name, spy(getattr(os, name), name))

    def read_bytes():  # every read(2)/pread(2) of this thread: /proc/thread-self/io's rchar
        return int(Path("/proc/thread-self/io").read_text().split("rchar: ")[1].split()[0])

    def costs(n):
        d = tmp_path / str(n)
        filler = ItemStore(d, "filler")
        for b in range(0, n, 1000):
            filler.append([{"key": f"f{j}", "output": "z" * 2000} for j in range(b, min(n, b + 1000))])
        own = ItemStore(d, "filler")  # a resumed writer sees the others' records
        wanted = {f"f{j}" for j in range(0, n, max(1, n // 100))}
        scans.clear()
        before = read_bytes()
        for a in range(5):
            own.append([{"key": f"new{a}-{i}", "output": "w" * 500} for i in range(16)])
        appended = read_bytes() - before
        before = read_bytes()
        got = ItemStore(d, "reader").load(wanted)
        looked_up = read_bytes() - before
        assert set(got) == wanted and scans == [], scans
        return appended, looked_up, len(wanted)

    small, large = costs(200), costs(10000)
    # The old layout re-read every record: 0.4 MB at 200 stored, 20 MB at 10,000. A lookup reads each
    # wanted record once (the counter sees preads: at least that much); the slack is for reading
    # /proc itself.
    slack = 8 * 1024
    assert small[0] < slack and large[0] < slack, (small, large)
    record = len('{"key": "f1234", "output": ""}') + 2000
    for looked_up, n_wanted in (small[1:], large[1:]):
        assert n_wanted * 2000 <= looked_up < n_wanted * record + slack, (small, large)


# Another value for each field that decides an item's result; the test fails when a field is added
# without one, so that a new setting cannot silently reuse answers computed without it.
OTHER_VALUE = {
    "dtype": "float16",
    "quantization": "8bit",
    "bnb_4bit_quant_type": "fp4",
    "bnb_4bit_use_double_quant": False,
    "bnb_4bit_compute_dtype": "float16",
    "max_new_tokens": 25,
    "system_prompt": "Be brief.",
    "use_chat_template": False,
    "do_sample": False,
    "temperature": 0.7,
    "top_p": 0.9,
    "seed": 1,
    "verdict": "logprob",
    "engine": "vllm",
    "chat_template_kwargs": {"enable_thinking": False},
}


def test_key_depends_on_every_part(tmp_path):
    """The key the jobs really use (PromptSet.key): every item field, the model's files, the prompt, the kind."""
    import dataclasses
    import shutil

    from genjudge.config.specs import GeneratorSpec, JudgeSpec, spec_for
    from genjudge.engine.completion import PromptSet

    root = Path(__file__).resolve().parents[1]
    model = tmp_path / "gen"
    shutil.copytree(root / "models" / "demo-generator", model)
    for role, cls, kind in (("generator", GeneratorSpec, "generate"), ("judge", JudgeSpec, "judge")):
        # Every item field in force: sampling (generator) and 4-bit settings are read only when on.
        active = {"quantization": "4bit", **({"do_sample": True} if role == "generator" else {})}
        base = spec_for(role, model=str(model), **active)
        key = PromptSet(base, kind).key("What is 2 + 2?")
        assert key == PromptSet(spec_for(role, model=str(model), **active), kind).key("What is 2 + 2?")
        assert PromptSet(base, kind).key("What is 2 + 3?") != key
        assert PromptSet(base, "other-kind").key("What is 2 + 2?") != key
        item_fields = set(cls.fields_changing("item")) - {"model", "revision"}
        assert item_fields <= set(OTHER_VALUE), f"no other value for {item_fields - set(OTHER_VALUE)}"
        for name in sorted(item_fields):
            changed = dataclasses.replace(base, **{name: OTHER_VALUE[name]})
            assert PromptSet(changed, kind).key("What is 2 + 2?") != key, name
        # The default engine leaves keys as they were before engines were a setting: caches stay valid.
        assert "engine" not in base.item_params() and "engine" not in base.rerun_params()
        # So do no chat template variables (the setting came later too).
        assert "chat_template_kwargs" not in base.item_params() and "chat_template_kwargs" not in base.rerun_params()
        for name, value in (
            ("batch_size", 3),
            ("memory_margin", 0.5),
            ("device_map", "cpu"),
            ("vllm", {**base.vllm, "chunk_size": 7, "gpu_memory_utilization": 0.5}),
        ):
            changed = dataclasses.replace(base, **{name: value})
            assert PromptSet(changed, kind).key("What is 2 + 2?") == key, name
        # Settings with no effect as configured change nothing: sampling under greedy, 4-bit under none.
        plain = spec_for(role, model=str(model))
        idle = {"bnb_4bit_compute_dtype": "float16", **({"temperature": 1.5, "seed": 7} if role == "generator" else {})}
        assert PromptSet(dataclasses.replace(plain, **idle), kind).key("p") == PromptSet(plain, kind).key("p")
    # Overwritten weights: a new key, so no answer of the old weights is reused.
    before = PromptSet(spec_for("generator", model=str(model)), "generate").key("p")
    weights = model / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert PromptSet(spec_for("generator", model=str(model)), "generate").key("p") != before
