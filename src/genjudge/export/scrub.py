"""Texts genjudge writes itself (errors, reasons) can name this machine's files: an export replaces those
names before they leave the run directory. The answers, prompts and judge texts are the models' and the
dataset's own and are written as they are."""

from __future__ import annotations

import re

PATH = "<path>"
# An absolute path (not a URL's: no scheme, host or word right before its first slash).
ABSOLUTE = re.compile(r"(?<![\w.:/~-])/(?:[\w.@+-]+/)*[\w.@+-]+/?")


class Scrubber:
    """Replaces each of `private` (longest first) and any other absolute path by `<path>`, except a path
    inside the run's directory (`results/<run>/...`, which the export belongs to)."""

    def __init__(self, private: tuple[str, ...], run_dir: str):
        self.private = [p for p in sorted(set(private), key=lambda p: (-len(p), p)) if p]
        self.run_dir = run_dir.rstrip("/") + "/"

    def __call__(self, text):
        if not isinstance(text, str) or not text:
            return text
        kept: dict[str, str] = {}

        def keep(m: re.Match) -> str:  # the run's own files stay named, from results/<run>/ on
            kept[f"\0{len(kept)}\0"] = m.group(1)
            return f"\0{len(kept) - 1}\0"

        text = re.sub(rf"(?<!\S)\S*?({re.escape(self.run_dir)}\S*)", keep, text)
        text = ABSOLUTE.sub(PATH, text)  # whole, before a part of one is matched as a private string
        for p in self.private:
            text = text.replace(p, PATH)
        for k, v in kept.items():
            text = text.replace(k, v)
        return text
