"""Atomic outputs: complete or absent, with the permissions the umask asks for."""

import os
import stat
import subprocess
import sys

import pandas as pd
import pytest

from genjudge.store import atomic

WRITE = """
import os, sys
import pandas as pd
from genjudge.store import atomic
os.umask(int(sys.argv[2], 8))
atomic.write_text(sys.argv[1] + "/a.txt", "x")
atomic.write_json(sys.argv[1] + "/b.json", {"a": 1})
atomic.write_parquet(sys.argv[1] + "/c.parquet", pd.DataFrame({"a": [1]}))
"""


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_outputs_honour_the_umask(tmp_path, umask, mode):
    # A separate process, so that changing the umask cannot touch other tests.
    subprocess.run([sys.executable, "-c", WRITE, str(tmp_path), oct(umask)], check=True)
    for name in ("a.txt", "b.json", "c.parquet"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == mode, name


def test_a_failed_write_leaves_neither_output_nor_temporary(tmp_path):
    with pytest.raises(RuntimeError), atomic.atomic_path(tmp_path / "out.txt") as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []
    atomic.write_parquet(tmp_path / "t.parquet", pd.DataFrame({"a": [1, 2]}))
    assert pd.read_parquet(tmp_path / "t.parquet")["a"].tolist() == [1, 2]
