"""The documentation: the MkDocs site builds with --strict (a broken link or a page missing from the
site fails it) and fetches nothing from the network; the README stays short; config/README.md describes
every key of the schema exactly once."""

import fnmatch
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from judges import ROOT

README_WORDS = 2500


def mkdocs(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        timeout=300,
    )


def test_the_site_builds_strictly_and_fetches_nothing_from_the_network(tmp_path):
    proc = mkdocs(ROOT, tmp_path / "site")
    assert proc.returncode == 0, proc.stderr[-3000:]
    pages = sorted((tmp_path / "site").glob("*.html"))
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)["nav"]
    listed = re.findall(r"([\w-]+)\.md", str(nav))
    assert sorted(p.stem for p in pages) == sorted([*listed, "404"])  # one page per nav entry, none left out
    for page in pages:
        text = page.read_text(encoding="utf-8")
        fetched = re.findall(r'<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)="((?:https?:)?//[^"]*)"', text)
        assert fetched == [], (page.name, fetched)
    for css in (tmp_path / "site" / "assets").rglob("*.css"):
        assert not re.search(r"@import\s+url\(\s*['\"]?https?:|fonts\.googleapis", css.read_text()), css


def test_a_broken_link_or_a_missing_page_fails_the_build(tmp_path):
    for name in ("docs", "mkdocs.yml"):
        (shutil.copytree if name == "docs" else shutil.copy)(ROOT / name, tmp_path / name)
    page = tmp_path / "docs" / "statistics.md"
    page.write_text(page.read_text() + "\nSee [the intervals](intervals.md).\n")
    proc = mkdocs(tmp_path, tmp_path / "site")
    assert proc.returncode != 0 and "intervals.md" in proc.stderr, proc.stderr[-2000:]
    page.write_text(page.read_text().replace("[the intervals](intervals.md)", "the intervals"))
    assert mkdocs(tmp_path, tmp_path / "site").returncode == 0
    (tmp_path / "docs" / "trust.md").unlink()
    proc = mkdocs(tmp_path, tmp_path / "site")
    assert proc.returncode != 0 and "trust.md" in proc.stderr, proc.stderr[-2000:]


def words(markdown: str) -> int:
    """Words as a reader counts them: prose, code and tables, without the HTML tags of the pictures."""
    return len(re.sub(r"<[^>]+>", " ", markdown).split())


def test_the_readme_is_read_in_ten_minutes():
    n = words((ROOT / "README.md").read_text(encoding="utf-8"))
    assert n <= README_WORDS, f"README.md has {n} words (at most {README_WORDS}): move the detail into docs/"


# --- config/README.md against the schema -------------------------------------------------------------


def schema_keys(node: dict, prefix: str = "") -> dict:
    """{dotted key: its schema node} of every leaf of the schema (a map of named entries is a leaf)."""
    out = {}
    for name, sub in (node.get("properties") or {}).items():
        key = f"{prefix}.{name}" if prefix else name
        out |= schema_keys(sub, key) if sub.get("properties") else {key: sub}
    return out


def described_keys(doc: str) -> list[tuple[str, str]]:
    """(key pattern, row) for each key a row of config/README.md's key tables describes. A row names
    one or more keys in its first cell: `a.b`, `a.c`; `.d` continues the key before it (`a.d`); `*`
    matches any key; the table of keys both roles share stands for `generator.<key>` and `judge.<key>`."""
    out = []
    header = None
    for line in doc.splitlines():
        if line.startswith("| key |"):
            header = line
            continue
        if not line.startswith("|") or header is None:
            header = None if not line.startswith("|") else header
            continue
        if line.startswith("|---"):
            continue
        first = line.split("|")[1]
        prev = ""
        for token in re.findall(r"`([^`]+)`", first):
            key = prev.rsplit(".", 1)[0] + token if token.startswith(".") else token
            prev = key
            roles = ("generator.", "judge.") if "generator default" in header else ("",)
            out += [(role + key, line) for role in roles]
    return out


def coverage(keys: dict, rows: list) -> tuple[list, list]:
    """(keys no row describes, keys two or more rows describe)."""
    missing, twice = [], []
    for key in keys:
        hits = [row for pattern, row in rows if fnmatch.fnmatchcase(key, pattern)]
        (missing if not hits else twice if len(hits) > 1 else []).append(key)
    return missing, twice


def schema() -> dict:
    return schema_keys(yaml.safe_load((ROOT / "config" / "schemas" / "config.schema.yaml").read_text()))


def test_config_readme_describes_every_schema_key_exactly_once():
    keys = schema()
    rows = described_keys((ROOT / "config" / "README.md").read_text(encoding="utf-8"))
    missing, twice = coverage(keys, rows)
    assert missing == [] and twice == [], f"no description: {missing}; described twice: {twice}"
    # Every row describes a key the schema has (or a setting inside a map of named entries, `panels.<name>.rule`).
    maps = {k for k, node in keys.items() if node.get("additionalProperties") not in (None, False)}
    stray = [p for p, _ in rows if not any(fnmatch.fnmatchcase(k, p) for k in keys) and p.split(".")[0] not in maps]
    assert stray == [], stray


def test_the_docs_describe_no_key_a_second_time():
    # Key tables belong to config/README.md alone; the docs pages link to it.
    for page in (ROOT / "docs").glob("*.md"):
        assert "| key |" not in page.read_text(encoding="utf-8"), page.name


def test_the_key_check_fails_for_a_key_without_a_row_or_with_two():
    keys = schema()
    doc = (ROOT / "config" / "README.md").read_text(encoding="utf-8")
    row = next(line for line in doc.splitlines() if line.startswith("| `report.n_examples` |"))
    assert coverage(keys, described_keys(doc.replace(row + "\n", ""))) == (["report.n_examples"], [])
    assert coverage(keys, described_keys(doc.replace(row, row + "\n" + row))) == ([], ["report.n_examples"])
    shared = next(line for line in doc.splitlines() if line.startswith("| `dtype` |"))
    assert coverage(keys, described_keys(doc.replace(shared + "\n", ""))) == (["generator.dtype", "judge.dtype"], [])
