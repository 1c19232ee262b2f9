from genjudge.item_store import ItemStore, item_key


def test_records_survive_and_torn_tail_is_cut(tmp_path):
    store = ItemStore(tmp_path, "run-shard0")
    store.append([{"key": "a", "output": "1"}, {"key": "b", "output": "2"}])
    # A kill in the middle of a write leaves a partial last line.
    with open(store.path, "a") as fh:
        fh.write('{"key": "c", "outp')
    assert set(ItemStore(tmp_path, "run-shard0").load()) == {"a", "b"}
    store.append([{"key": "c", "output": "3"}])
    assert {k: r["output"] for k, r in store.load().items()} == {"a": "1", "b": "2", "c": "3"}
    assert store.path.read_text().count("\n") == 3


def test_other_writers_records_are_reused(tmp_path):
    ItemStore(tmp_path, "run-shard0").append([{"key": "a", "output": "1"}])
    ItemStore(tmp_path, "run-shard1").append([{"key": "b", "output": "2"}])
    assert set(ItemStore(tmp_path, "other").load({"a", "b", "z"})) == {"a", "b"}


def test_key_depends_on_every_part():
    base = dict(kind="generate", model="m", params={"max_new_tokens": 8}, prompt="p")
    k = item_key(**base)
    assert k == item_key(**dict(base))
    for change in ({"model": "m2"}, {"params": {"max_new_tokens": 9}}, {"prompt": "q"}):
        assert item_key(**{**base, **change}) != k
