"""`genjudge shards`: right-sizing generation shards from the load and compute seconds in the metas."""

import subprocess
import sys

from genjudge.data.shard_sizing import sizing
from genjudge.store.records import GenerateMeta


def write_metas(run_dir, generator, n_shards, items, load, per_item, resumed=0, first=0, setup=0.0):
    for i in range(first, first + n_shards):
        path = run_dir / "generations" / generator / "questions" / f"{i}.meta.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        computed = items - resumed
        GenerateMeta(
            generator=generator,
            dataset="questions",
            shard=i,
            n_items=items,
            resumed_items=resumed,
            computed_items=computed,
            load_seconds=load,
            setup_seconds=setup,
            generate_seconds=computed * per_item,
            slurm_partition="small",
        ).write(path)


def test_load_against_compute_gives_the_most_shards_worth_their_load(tmp_path):
    write_metas(tmp_path, "big", 10, 1000, load=1.0, per_item=0.1)  # 10,000 items, 90 items earn a load
    write_metas(tmp_path, "tiny", 8, 125, load=10.0, per_item=0.01)  # loading dwarfs 1.25 s of compute
    frame = sizing(tmp_path).set_index("generator")
    assert frame.loc["big", "shards"] == 10 and frame.loc["big", "load_s"] == 1.0
    assert frame.loc["big", "compute_s"] == 100.0 and frame.loc["big", "fixed_share"] == round(10 / 1010, 3)
    assert frame.loc["big", "max_shards"] == 111  # 10,000 / (1 s * 9 / 0.1 s)
    assert frame.loc["tiny", "fixed_share"] == round(80 / 90, 3) and frame.loc["tiny", "max_shards"] == 1

    out = subprocess.run(
        [sys.executable, "-m", "genjudge.cli", "shards", str(tmp_path), "--max-load-share", "0.5"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "| big | questions | 10 | 1000.0 | 0.0 | 1.0 | 100.0 | 0.01 | 0.1 | 1000 |" in out
    assert "under 50% of each generation job" in out


def test_a_run_without_metas_is_an_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "genjudge.cli", "shards", str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 1 and "no generation meta files" in proc.stderr


def test_shards_that_came_from_the_cache_print_no_nan_and_no_load(tmp_path):
    # Every shard of "cached" came from the item cache: no model loaded, nothing to size by.
    write_metas(tmp_path, "cached", 3, 100, load=0.0, per_item=0.1, resumed=100)
    # "mixed": two shards computed (load 8 s), two came from the cache (no load): the load is the loaders'.
    write_metas(tmp_path, "mixed", 2, 100, load=8.0, per_item=0.1)
    write_metas(tmp_path, "mixed", 2, 100, load=0.0, per_item=0.1, resumed=100, first=2)
    frame = sizing(tmp_path).set_index("generator")
    assert frame.loc["mixed", "load_s"] == 8.0 and frame.loc["mixed", "compute_s_per_item"] == 0.1
    assert frame.loc["cached", "load_s"] is None and frame.loc["cached", "max_shards"] is None
    out = subprocess.run(
        [sys.executable, "-m", "genjudge.cli", "shards", str(tmp_path)], capture_output=True, text=True, check=True
    ).stdout
    assert "nan" not in out.lower()
    assert "| cached | questions | 3 | 100.0 | - | - | - | - | - | - |" in out
    assert "cached/questions: every shard came from the item cache" in out


def test_set_up_and_load_are_apart_as_the_report_has_them_and_both_are_fixed_costs(tmp_path):
    """A job's set-up (tokenizer, fingerprint, their imports) is shown beside its load, which is the weights'
    alone as in the report; both are paid before the first item, so the shard size weighs both."""
    write_metas(tmp_path, "g", 4, 100, load=2.0, per_item=0.1, setup=6.0)
    row = sizing(tmp_path).set_index("generator").loc["g"]
    assert (row["setup_s"], row["load_s"]) == (6.0, 2.0)
    assert row["fixed_share"] == round(4 * 8 / (4 * 8 + 40), 3)
    assert row["max_shards"] == 1  # 8 s under 10% needs 720 items a job (8 * 9 / 0.1): one shard of 400
