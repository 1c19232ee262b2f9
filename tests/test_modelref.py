"""Model fingerprints: every byte of a local checkpoint counts; large files are hashed once per
version (the digest index), a hub cache's blobs are taken by their names."""

import hashlib
import multiprocessing
import os
import shutil
import time

import numpy as np
import pytest
from safetensors.numpy import save_file

from genjudge.models.modelref import DigestIndex, fingerprint, hub_blob_sha256

MIB = 1024 * 1024


def checkpoint(path, mib=72):
    """A real safetensors checkpoint over 64 MiB (the size above which files entered the
    fingerprint by their ends only), with a config.json."""
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"model_type": "llama"}')
    rng = np.random.default_rng(0)
    save_file({"w": rng.standard_normal(mib * MIB // 4, dtype=np.float32)}, str(path / "model.safetensors"))
    return path / "model.safetensors"


def flip_middle_byte(path, keep_mtime=True):
    """Change one byte in the middle of the file in place: same size, and (as `cp -p` or
    rsync -t would leave it) the same mtime."""
    st = os.stat(path)
    with open(path, "r+b") as fh:
        fh.seek(st.st_size // 2)
        byte = fh.read(1)
        fh.seek(st.st_size // 2)
        fh.write(bytes([byte[0] ^ 0xFF]))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size


def entries(directory):
    return sorted(p for p in directory.rglob("*") if p.is_symlink())


def test_one_byte_in_the_middle_of_a_large_file_changes_the_fingerprint(tmp_path):
    weights = checkpoint(tmp_path / "m")
    assert weights.stat().st_size > 64 * MIB
    index = DigestIndex(tmp_path / "digests", settle_seconds=0)
    before = fingerprint(str(tmp_path / "m"), digests=index)
    assert fingerprint(str(tmp_path / "m"), digests=index) == before
    flip_middle_byte(weights)
    after = fingerprint(str(tmp_path / "m"), digests=index)
    assert after != before
    assert fingerprint(str(tmp_path / "m")) == after  # without an index: the same, hashed in full
    flip_middle_byte(weights)  # back to the first bytes
    assert fingerprint(str(tmp_path / "m"), digests=index) == before


def test_a_large_file_is_hashed_once_per_version(tmp_path):
    weights = checkpoint(tmp_path / "m")
    index = DigestIndex(tmp_path / "digests", settle_seconds=0)
    first = fingerprint(str(tmp_path / "m"), digests=index)
    (entry,) = entries(tmp_path / "digests")
    assert os.readlink(entry) == hashlib.sha256(weights.read_bytes()).hexdigest()
    # The second call reads the digest from the index, not the file: a different digest stored
    # there is what the fingerprint takes.
    os.unlink(entry)
    os.symlink("0" * 64, entry)
    assert fingerprint(str(tmp_path / "m"), digests=index) != first


def test_a_file_changed_just_now_is_not_recorded(tmp_path):
    weights = checkpoint(tmp_path / "m")
    # Its time a minute ahead of the clock: written just now, however long hashing it takes on a loaded
    # machine (the 2 s are counted from the file's time to the end of the hash).
    ahead = time.time_ns() + 60 * 10**9
    os.utime(weights, ns=(ahead, ahead))
    index = DigestIndex(tmp_path / "digests")  # 2 s: a second write could share the timestamp
    fingerprint(str(tmp_path / "m"), digests=index)
    assert not entries(tmp_path / "digests")


def hub_snapshot(tmp_path):
    """A checkpoint (tmp_path/copy) and the same files as a hub cache's snapshot of links to blobs named
    by their SHA-256: (the copy's weights, the snapshot directory)."""
    weights = checkpoint(tmp_path / "copy")
    repo = tmp_path / "hub" / "models--org--m"
    (repo / "blobs").mkdir(parents=True)
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    for f in sorted((tmp_path / "copy").iterdir()):
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        shutil.copy(f, repo / "blobs" / digest)
        os.symlink(f"../../blobs/{digest}", repo / "snapshots" / "abc123" / f.name)
    return weights, repo / "snapshots" / "abc123"


def test_a_hub_snapshot_uses_its_blob_names_and_fingerprints_as_its_copy(tmp_path):
    weights, snapshot = hub_snapshot(tmp_path)
    assert hub_blob_sha256(snapshot / "model.safetensors") == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert hub_blob_sha256(weights) is None  # a plain file
    index = DigestIndex(tmp_path / "digests", settle_seconds=0)
    assert fingerprint(str(snapshot), digests=index) == fingerprint(str(tmp_path / "copy"))
    # Nothing was hashed: the index holds only what the blob looked like when first seen.
    blob = (snapshot / "model.safetensors").resolve()
    (entry,) = entries(tmp_path / "digests")
    st = blob.stat()
    assert os.readlink(entry) == f"{blob.name}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}:{st.st_dev}"


@pytest.mark.parametrize("keep_mtime", [False, True], ids=["new-mtime", "mtime-restored"])
def test_a_write_through_a_hub_snapshot_link_changes_the_fingerprint(tmp_path, keep_mtime):
    """The blob's name still says the old SHA-256 and its byte count is the same; its mtime is new, or
    restored as `cp -p` and `rsync -t` leave it (its ctime is new either way)."""
    weights, snapshot = hub_snapshot(tmp_path)
    index = DigestIndex(tmp_path / "digests", settle_seconds=0)
    before = fingerprint(str(snapshot), digests=index)
    flip_middle_byte(snapshot / "model.safetensors", keep_mtime=keep_mtime)
    flip_middle_byte(weights, keep_mtime=keep_mtime)
    after = fingerprint(str(snapshot), digests=index)
    assert after != before and after == fingerprint(str(tmp_path / "copy"))


def _fingerprint_in_process(args):
    path, index_dir = args
    return fingerprint(path, digests=DigestIndex(index_dir, settle_seconds=0))


def test_concurrent_writers_agree_and_leave_one_entry(tmp_path):
    checkpoint(tmp_path / "m", mib=65)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        got = pool.map(_fingerprint_in_process, [(str(tmp_path / "m"), str(tmp_path / "d"))] * 4)
    assert len(set(got)) == 1 and got[0] == fingerprint(str(tmp_path / "m"))
    assert len(entries(tmp_path / "d")) == 1
    assert [p for p in (tmp_path / "d").rglob(".*")] == []  # no temporary link left behind


def test_a_read_only_index_still_gives_the_right_fingerprint(tmp_path):
    checkpoint(tmp_path / "m", mib=65)
    (tmp_path / "d").write_text("not a directory")  # the index cannot be written
    got = fingerprint(str(tmp_path / "m"), digests=DigestIndex(tmp_path / "d", settle_seconds=0))
    assert got == fingerprint(str(tmp_path / "m"))


def test_checkpoints_of_small_files_keep_their_fingerprint(tmp_path):
    """Files up to 64 MiB are hashed whole, as before: their fingerprints (and cached answers) stay."""
    checkpoint(tmp_path / "m", mib=1)
    h = hashlib.sha256()
    for f in sorted((tmp_path / "m").rglob("*")):
        h.update(f"{f.name}:{f.stat().st_size}".encode())
        h.update(f.read_bytes())
    assert fingerprint(str(tmp_path / "m")) == h.hexdigest()[:16]


def test_a_blob_recorded_before_ctime_and_inode_were_kept_is_recorded_again_without_hashing(tmp_path, monkeypatch):
    from genjudge.models import modelref

    weights, snapshot = hub_snapshot(tmp_path)
    index = DigestIndex(tmp_path / "digests", settle_seconds=0)
    expected = fingerprint(str(snapshot), digests=index)
    (entry,) = entries(tmp_path / "digests")
    blob = (snapshot / "model.safetensors").resolve()
    old = f"{blob.name}:{blob.stat().st_size}:{blob.stat().st_mtime_ns}"  # the earlier format
    os.unlink(entry)
    os.symlink(old, entry)

    def never(path):
        raise AssertionError(f"{path} was hashed in full")

    monkeypatch.setattr(modelref, "_file_sha256", never)
    assert fingerprint(str(snapshot), digests=index) == expected
    assert os.readlink(entry) != old and os.readlink(entry).startswith(old + ":")
