"""tools/commit_msg.py, the commit-msg hook of .pre-commit-config.yaml: a subject of at most 72
characters, then a blank line."""

import subprocess
import sys

import yaml
from judges import ROOT

TOOL = ROOT / "tools" / "commit_msg.py"


def check(tmp_path, message: str) -> subprocess.CompletedProcess:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message)
    return subprocess.run([sys.executable, TOOL, path], capture_output=True, text=True)


def test_a_short_subject_then_a_blank_line_passes(tmp_path):
    good = "Report: name the failed cells\n\nWhy, and the evidence.\n# Please enter the commit message\n"
    assert check(tmp_path, good).returncode == 0
    assert check(tmp_path, "x" * 72 + "\n").returncode == 0
    # git's comments and what `commit -v` shows below the scissors are not the message
    long_comment = (
        "Fix a typo\n\n# " + "y" * 100 + "\n# ------------------------ >8 ------------------------\n" + "z" * 99
    )
    assert check(tmp_path, long_comment).returncode == 0


def test_a_long_or_run_on_subject_is_refused(tmp_path):
    long = check(tmp_path, "x" * 73 + "\n\nbody\n")
    assert long.returncode == 1 and "the subject has 73 characters, more than 72" in long.stderr
    run_on = check(tmp_path, "Fix the report\nand the plan too\n")
    assert run_on.returncode == 1 and "leave a blank line before the body" in run_on.stderr
    assert check(tmp_path, "# only a comment\n").returncode == 1


def test_pre_commit_runs_it_on_the_message():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    assert "commit-msg" in config["default_install_hook_types"]
    (hook,) = [h for r in config["repos"] if r["repo"] == "local" for h in r["hooks"]]
    assert hook["stages"] == ["commit-msg"] and hook["entry"].endswith("tools/commit_msg.py")
