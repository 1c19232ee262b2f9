import pandas as pd
import pytest

from genjudge.judging.stats import wilson_interval
from genjudge.judging.textnorm import exact_match
from genjudge.stages.merge import MergeError, merge_generations


def _items(ids):
    return pd.DataFrame({"id": ids, "prompt": "q", "reference": "r", "category": None})


def _shard(path, ids):
    pd.DataFrame({"id": ids, "output": "o"}).to_parquet(path)
    return str(path)


def test_merge_checks_every_id_exactly_once(tmp_path):
    a = _shard(tmp_path / "0.parquet", ["1", "2"])
    b = _shard(tmp_path / "1.parquet", ["3"])
    merged = merge_generations(_items(["1", "2", "3"]), [a, b])
    assert merged["id"].tolist() == ["1", "2", "3"] and merged["shard"].tolist() == [0, 0, 1]
    dup = _shard(tmp_path / "d.parquet", ["3", "2"])
    with pytest.raises(MergeError, match="more than once"):
        merge_generations(_items(["1", "2", "3"]), [a, dup])
    with pytest.raises(MergeError, match="1 missing id"):
        merge_generations(_items(["1", "2", "3", "4"]), [a, b])


def test_wilson_interval_and_exact_match():
    lo, hi = wilson_interval(8, 10)
    assert 0.49 < lo < 0.5 and 0.94 < hi < 0.95
    assert wilson_interval(0, 0) is None
    assert exact_match("The Paris.", "paris") is True
    assert exact_match("Lyon", "Paris") is False
    assert exact_match("x", None) is None
