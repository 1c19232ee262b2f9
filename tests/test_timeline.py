"""The jobs' time line from their meta: lanes, bars, idle time, stage walls and the critical path."""

import pytest

from genjudge.report_html import timeline as tl
from genjudge.store.records import GenerateMeta, JudgeMeta

T0 = 1_700_000_000.0


def gen(shard, gpus, start, end, load=1.0, compute=2.0, generator="g", dataset="d", host="h"):
    return GenerateMeta(
        generator=generator,
        dataset=dataset,
        shard=shard,
        gpus=gpus,
        hostname=host,
        started_at=T0 + start,
        finished_at=T0 + end,
        load_seconds=load,
        generate_seconds=compute,
        n_items=10,
        computed_items=10,
    )


def judge(gpus, start, end, cells=("g/d",), load=3.0, compute=4.0, host="h"):
    return JudgeMeta(
        gpus=gpus,
        hostname=host,
        started_at=T0 + start,
        finished_at=T0 + end,
        load_seconds=load,
        judge_seconds=compute,
        cells={c: {"n_items": 10, "resumed": 0, "computed": 10} for c in cells},
    )


def test_four_gpus_lanes_bars_idle_and_critical_path():
    metas = [gen(0, ["0"], 0, 10), gen(1, ["1"], 0, 6), gen(2, ["1"], 6, 12), gen(3, ["2"], 1, 5)]
    j = judge(["0", "1", "2", "3"], 15, 25)
    t = tl.build(tl.jobs_from_metas(metas, {"J": j}))
    assert t.span == 25 and t.lanes == ["GPU 0", "GPU 1", "GPU 2", "GPU 3"]
    # One bar per job and GPU it held: the judge on every lane.
    assert sorted((b.lane, b.job.name) for b in t.bars if b.job.kind == "judge") == [
        (f"GPU {i}", "judge J") for i in range(4)
    ]
    assert len(t.bars) == 4 + 4
    busy = {s.lane: s.busy_seconds for s in t.lane_stats}
    assert busy == {"GPU 0": 20, "GPU 1": 22, "GPU 2": 14, "GPU 3": 10}
    assert t.stats("GPU 3").idle_seconds == 15 and t.stats("GPU 3").busy_fraction == pytest.approx(0.4)
    assert t.stats("GPU 1").load_seconds == 1 + 1 + 3 and t.stats("GPU 1").compute_seconds == 2 + 2 + 4
    walls = {s["stage"]: s["wall"] for s in t.stages}
    assert walls == {"generate g/d": 12, "judge J": 10}
    # The judge waited for the last shard (#2 on GPU 1, finished at 12): 3 s between them; #2 waited for
    # GPU 1, which #1 held until 6.
    assert [(p["job"], p["after"]) for p in t.critical_path] == [
        ("generate g/d #1", ""),
        ("generate g/d #2", "GPU"),
        ("judge J", "input"),
    ]
    assert [p["wait_before"] for p in t.critical_path] == [None, 0, pytest.approx(3.0)]


def test_unused_gpus_of_the_inventory_get_idle_lanes():
    t = tl.build(tl.jobs_from_metas([gen(0, ["0"], 0, 4)], {}), inventory=["0", "1", "2", "3"])
    assert t.lanes == ["GPU 0", "GPU 1", "GPU 2", "GPU 3"]
    assert [s.busy_fraction for s in t.lane_stats] == [1.0, 0.0, 0.0, 0.0]
    assert [s.idle_seconds for s in t.lane_stats] == [0.0, 4.0, 4.0, 4.0]


def test_overlapping_cpu_jobs_get_lanes_of_their_own_and_several_hosts_prefix_gpus():
    metas = [gen(0, [], 0, 5), gen(1, [], 1, 4), gen(2, [], 5, 9), gen(3, ["0"], 0, 2, host="a")]
    t = tl.build(tl.jobs_from_metas(metas, {}))
    assert t.lanes == ["a GPU 0", "CPU", "CPU 2"]
    lane = {b.job.name: b.lane for b in t.bars}
    assert lane["generate g/d #0"] == lane["generate g/d #2"] == "CPU" and lane["generate g/d #1"] == "CPU 2"
    assert t.stats("CPU").idle_seconds == 0 and t.stats("CPU 2").busy_seconds == 3
    # Capped: a third overlapping job shares the last lane rather than adding one.
    capped = tl.build(tl.jobs_from_metas([gen(i, [], 0, 5) for i in range(5)], {}), max_cpu_lanes=2)
    assert capped.lanes == ["CPU", "CPU 2"] and len(capped.bars) == 5


def test_judge_shards_and_pairwise_cells_point_at_the_generations_they_read():
    metas = [gen(0, ["0"], 0, 3, generator="a"), gen(0, ["1"], 0, 8, generator="b"), gen(0, ["0"], 3, 4, dataset="x")]
    shards = [judge(["0"], 9, 12, cells=("a/d vs b",)), judge(["1"], 9, 14, cells=("a/d vs b",))]
    for i, s in enumerate(shards):
        s.judge_shard = i
    merged = JudgeMeta.merged(shards)
    t = tl.build(tl.jobs_from_metas(metas, {"J": merged}))
    assert sorted(j.name for j in t.jobs if j.kind == "judge") == ["judge J #0", "judge J #1"]
    # The last job is judge shard 1; it read a/d and b/d (the opponent), and b/d finished last.
    assert [(p["job"], p["after"]) for p in t.critical_path] == [("generate b/d #0", ""), ("judge J #1", "input")]
    assert t.critical_path[0]["wait_before"] is None and t.critical_path[1]["wait_before"] == 1


def test_a_job_that_waited_for_a_gpu_held_by_an_unrelated_job():
    # Two judges, each on both GPUs: the second waited for the first, not for its generations.
    metas = [gen(0, ["0"], 0, 5, generator="a"), gen(0, ["1"], 0, 4, generator="b")]
    t = tl.build(
        tl.jobs_from_metas(metas, {"J1": judge(["0", "1"], 6, 10, ("a/d",)), "J2": judge(["0", "1"], 11, 15, ("b/d",))})
    )
    assert [(p["job"], p["after"]) for p in t.critical_path] == [
        ("generate a/d #0", ""),
        ("judge J1", "input"),  # its input and its GPU at once: the input is named
        ("judge J2", "GPU"),
    ]
    assert [p["wait_before"] for p in t.critical_path] == [None, 1, 1]


def test_load_and_compute_segments_stay_inside_the_bar():
    t = tl.build(tl.jobs_from_metas([gen(0, ["0"], 0, 2, load=1.5, compute=3.0)], {}))
    (b,) = t.bars
    assert (b.start, b.load_end, b.compute_end, b.end) == (0, 1.5, 2, 2)


def test_metas_without_times_are_left_out_and_nothing_is_an_empty_timeline():
    m = gen(0, ["0"], 0, 1)
    m.finished_at = None
    t = tl.build(tl.jobs_from_metas([m], {}))
    assert t.bars == [] and t.lanes == [] and t.critical_path == []


def test_each_snakemake_command_is_a_band_of_its_own_with_its_failed_attempts():
    # Command 1 (started at 0): shards 0 and 1; shard 1 failed on GPU 1. The user fixed the cause and ran
    # command 2 at 100: shard 1 again and the judge, which also read shard 0 (made by command 1).
    first, second = f"{T0:.3f}-11", f"{T0 + 100:.3f}-22"
    s0, s1 = gen(0, ["0"], 1, 9), gen(1, ["1"], 101, 106)
    s0.invocation, s1.invocation = first, second
    j = judge(["0", "1"], 108, 115)
    j.invocation = second
    failed = {
        "role": "generate",
        "job": "g/d/1",
        "started_at": T0 + 1,
        "at": T0 + 3,
        "hostname": "h",
        "gpus": ["1"],
        "invocation": first,
        "type": "InputError",
        "message": "item 7: too long\nmore",
    }
    old = {**failed, "started_at": None}  # recorded before attempts said when they started: not drawn
    jobs = tl.jobs_from_metas([s0, s1], {"J": j}, [failed, old])
    one, two = tl.bands(jobs, inventory=["0", "1"])
    assert (one.invocation, two.invocation) == (first, second)
    assert (one.command_started, two.command_started) == (pytest.approx(T0), pytest.approx(T0 + 100))
    # The failed attempt is a bar of the first command, on the GPU it held, marked as failed.
    (f,) = one.failed
    assert f.name == "generate g/d #1 (failed)" and f.failed == "InputError: item 7: too long"
    assert [(b.lane, b.start, b.end) for b in one.bars if b.job.failed] == [("GPU 1", 0, 2)]
    assert one.span == 8 and one.stats("GPU 1").busy_seconds == 2 and one.stats("GPU 1").idle_seconds == 6
    assert [s["stage"] for s in one.stages] == ["generate g/d"] and one.stages[0]["jobs"] == 1
    # The second command's window starts at its own first job: the 92 s between the commands are no one's
    # idle time, and the judge waited only for the shard of its own command.
    assert two.span == 14 and two.stats("GPU 0").idle_seconds == 7
    assert [(p["job"], p["after"], p["wait_before"]) for p in two.critical_path] == [
        ("generate g/d #1", "", None),
        ("judge J", "input", 2),
    ]
    # Jobs whose meta names no command (written before it was recorded) are one band, as before.
    (legacy,) = tl.bands(tl.jobs_from_metas([gen(0, ["0"], 0, 4), gen(1, ["0"], 50, 60)], {}))
    assert legacy.invocation is None and legacy.span == 60


def test_a_failed_judge_shard_is_named_after_its_shard():
    a = {"role": "judge", "job": "J/1-of-2", "started_at": T0, "at": T0 + 1, "type": "OutOfMemoryError"}
    assert tl.attempt_job(a).name == "judge J #1 (failed)" and tl.attempt_job(a).stage == "judge J"
    assert tl.attempt_job({**a, "job": "J/0-of-1"}).name == "judge J (failed)"
