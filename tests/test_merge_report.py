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


def test_provenance_names_the_input_files_by_their_digests(tmp_path):
    """A dataset file's digest is `sha256sum`'s; a directory's changes with any file's content or
    name; a hub id has none; a judge's labels file is listed under its judge."""
    import hashlib
    from types import SimpleNamespace

    from genjudge.store.provenance import file_digest, input_files

    data = tmp_path / "q.jsonl"
    data.write_text('{"id": "a"}\n')
    hf = tmp_path / "hf"
    (hf / "train").mkdir(parents=True)
    (hf / "train" / "data.arrow").write_bytes(b"rows")
    (hf / "dataset_dict.json").write_text("{}")
    labels = tmp_path / "labels.csv"
    labels.write_text("id,label\na,correct\n")
    exp = SimpleNamespace(
        datasets={"q": {"path": str(data)}, "hf": {"path": str(hf)}, "hub": {"path": "openai/gsm8k"}},
        judges={"j1": {"labels": {"path": str(labels)}}, "j2": {"labels": {}}},
    )
    got = input_files(exp)
    assert got["datasets"]["q"] == {
        "path": str(data),
        "sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        "bytes": 12,
    }
    assert got["datasets"]["hub"]["sha256"] is None
    assert got["labels"] == {"j1": file_digest(labels)} and got["labels"]["j1"]["bytes"] == 19
    before = got["datasets"]["hf"]
    assert before["bytes"] == 6 and len(before["sha256"]) == 64
    (hf / "train" / "data.arrow").write_bytes(b"ROWS")
    assert file_digest(hf)["sha256"] != before["sha256"]
    (hf / "train" / "data.arrow").write_bytes(b"rows")
    assert file_digest(hf) == before
    (hf / "train" / "data.arrow").rename(hf / "train" / "other.arrow")
    assert file_digest(hf)["sha256"] != before["sha256"]
