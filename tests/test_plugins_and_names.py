"""Plugin files and the names of runs, generators, datasets and judges."""

import re

import pytest

from genjudge.config import load_plugins, plugin_files
from genjudge.judging import modes

MODE = """
from genjudge.judging.modes import register
from genjudge.judging.modes.reference import Reference


class Mode(Reference):
    name = {name!r}


register(Mode())
"""


def test_two_plugin_files_with_the_same_name_are_two_modules(tmp_path):
    for folder, name in (("a", "plugin_twin_one"), ("b", "plugin_twin_two")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "modes.py").write_text(MODE.format(name=name))
    files = [str(tmp_path / "a" / "modes.py"), str(tmp_path / "b" / "modes.py")]
    load_plugins({"plugins": files})
    assert modes.get("plugin_twin_one").name == "plugin_twin_one"
    assert modes.get("plugin_twin_two").name == "plugin_twin_two"
    load_plugins({"plugins": files})  # once more: each file is imported once


def test_the_plugins_files_are_the_jobs_inputs(tmp_path):
    (tmp_path / "mine.py").write_text("")
    # a file as written; a module name as the file it imports from; nothing for a module with no file
    files = plugin_files({"plugins": [str(tmp_path / "mine.py"), "genjudge.judging.modes.score", "sys"]})
    assert files[0] == str(tmp_path / "mine.py")
    assert files[1].endswith("genjudge/judging/modes/score.py") and len(files) == 2


def test_a_missing_plugin_file_is_a_clear_error(tmp_path):
    from genjudge.errors import InputError

    with pytest.raises(InputError, match="plugins: '.*nowhere.py' not found"):
        load_plugins({"plugins": [str(tmp_path / "nowhere.py")]})


# --- names: a path component of results/<run>/..., never `.` or `..` --------------------------------


@pytest.mark.parametrize("name", [".", ".."])
def test_the_names_dot_and_dot_dot_are_refused(name):
    from genjudge.config import defaults
    from genjudge.config.experiment import resolve
    from genjudge.errors import InputError

    base = {"dataset": {"path": "d.jsonl"}, "generator": {"model": "g"}, "judge": {"model": "j"}}
    with pytest.raises(
        InputError, match=r"^run: '\.{1,2}': a name is letters, digits, '\.', '_' and '-' only, and not"
    ):
        defaults(run=name, **base)
    for key in ("generators", "datasets", "judges"):
        config = defaults(run="r", **base)
        config[key] = {name: {}}
        with pytest.raises(InputError, match=rf"^{key}\.{re.escape(name)}: a name is .* and not '\.' or '\.\.'"):
            resolve(config, check_pairs=False)


def test_a_default_name_is_never_dot_dot():
    from genjudge.config.experiment import default_name

    assert default_name("models/..") == "default" and default_name(".") == "default"
    assert default_name("data/gsm8k.jsonl") == "gsm8k" and default_name("a..b") == "a..b"
