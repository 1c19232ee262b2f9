"""How much each difference between genjudge's style features and Arena-Hard-Auto's moves the
style-controlled strengths, on a made-up set where one generator answers in fenced code most of the
time (its code holds `# comment` and `- x` lines) and others write real headers, `1)` lists and
indented headers. Writes bench/style_results.json; docs/judging-modern.md quotes it.

    .venv/bin/python bench/style_bench.py            # the figures, written to bench/style_results.json
    .venv/bin/python bench/style_bench.py --quick    # tiny sizes, nothing written

Each variant changes one thing in the features and refits the same games; the figure is the largest
change of a generator's controlled strength (log-odds), beside the largest bootstrap half-width.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from genjudge.judging import style_control as sc

OUT = Path(__file__).with_name("style_results.json")
OURS = sc.style  # the features as the report computes them
CODE = "```python\n# read the input\nx = read()\n# - the list\n- x\n# done\nprint(x)\n```"


def answer(gen: str, rng) -> str:
    words = " ".join(["word"] * int(rng.integers(20, 80)))
    if gen == "coder":
        if rng.random() < 0.7:
            return f"Here is the code.\n\n{CODE}\n\n{words}"
        return f"{words}\n- one point\n- another"
    if gen == "writer":
        heads = "\n".join(f"## Part {i}\n{words}" for i in range(int(rng.integers(1, 4))))
        return f"**Summary**\n{heads}\n1) first\n2) second"
    # plain: indented headers (three spaces) and short lists
    return f"In short:\n   # Answer\n{words}\n1. only"


def games(seed: int = 0, n_items: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    skill = {"coder": 0.3, "writer": 0.0, "plain": -0.3}
    rows = []
    pairs = [("coder", "writer"), ("coder", "plain"), ("writer", "plain")]
    for i in range(n_items):
        for a, b in pairs:
            ta, tb = answer(a, rng), answer(b, rng)
            fa, fb = sc.style(ta), sc.style(tb)
            # the judge likes substance, and headers and bold a little
            z = (
                skill[a]
                - skill[b]
                + 0.3 * np.tanh(fa["headers"] - fb["headers"])
                + 0.2 * np.tanh(fa["bold"] - fb["bold"])
            )
            y = float(rng.random() < 1 / (1 + np.exp(-z)))
            rows.append({"item": f"q{i}", "a": a, "b": b, "y": y, "a_text": ta, "b_text": tb})
    return pd.DataFrame(rows)


def arena_hard_style(text) -> dict:
    """Arena-Hard-Auto's counts (utils/add_markdown_info.py): code removed, headers `^#{k}\\s` at the
    line's start, ordered lists `^\\s*\\d+\\.\\s` only, unordered `^\\s*[-*+]\\s`, bold as ours."""
    t = str(text).strip()
    prose = re.sub(r"```[^`]*```", "", t)
    return {
        "length": len(t),
        "headers": len(re.findall(r"^#{1,6}\s", prose, re.M)),
        "lists": len(re.findall(r"^\s*\d+\.\s", prose, re.M)) + len(re.findall(r"^\s*[-*+]\s", prose, re.M)),
        "bold": len(re.findall(r"\*\*[^*\n]+\*\*", prose)) + len(re.findall(r"__[^_\n]+__", prose)),
    }


def without_paren_lists(text) -> dict:
    """Ours, with `1)` no list marker (Arena-Hard reads `1.` only)."""
    out = OURS(text)
    prose = re.sub(r"```[^`]*```", "", str(text).strip())
    return {**out, "lists": out["lists"] - len(re.findall(r"^\s*\d+\)\s+\S", prose, re.M))}


def without_indented_headers(text) -> dict:
    """Ours, with a `#` after one to three spaces no header (Arena-Hard: at the line's start only)."""
    out = OURS(text)
    prose = re.sub(r"```[^`]*```", "", str(text).strip())
    return {**out, "headers": len(re.findall(r"^#{1,6}\s", prose, re.M))}


def with_code_counted(text) -> dict:
    """The features before fenced code was removed."""
    t = str(text).strip()
    return {
        "length": len(t),
        "headers": len(sc._HEADER.findall(t)),
        "lists": len(sc._LIST.findall(t)),
        "bold": len(sc._BOLD.findall(t)),
    }


def controlled(g: pd.DataFrame, features=None, plus_one: bool = False, n_boot: int = 0) -> dict:
    original, original_diff = sc.style, sc.style_differences
    try:
        if features is not None:
            sc.style = features
        if plus_one:

            def diff(a_texts, b_texts):
                a = pd.DataFrame([sc.style(t) for t in a_texts], columns=sc.FEATURES).astype(float)
                b = pd.DataFrame([sc.style(t) for t in b_texts], columns=sc.FEATURES).astype(float)
                return (a - b) / (a + b + 1)

            sc.style_differences = diff
        return sc.style_controlled(g, n_boot=n_boot, seed=0)
    finally:
        sc.style, sc.style_differences = original, original_diff


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    g = games(n_items=20 if quick else 300)
    base = controlled(g, n_boot=5 if quick else 200)
    half = max((v["controlled_ci95"][1] - v["controlled_ci95"][0]) / 2 for v in base["strengths"].values())
    variants = {
        "fenced code counted (before this change)": controlled(g, with_code_counted),
        "+1 in the ratios' denominators (Arena-Hard)": controlled(g, plus_one=True),
        "`1)` is no list marker (Arena-Hard)": controlled(g, without_paren_lists),
        "an indented `#` is no header (Arena-Hard)": controlled(g, without_indented_headers),
        "Arena-Hard's markdown counts (both of these)": controlled(g, arena_hard_style),
        "both: Arena-Hard's counts and its +1": controlled(g, arena_hard_style, plus_one=True),
    }
    out = {
        "games": len(g),
        "controlled": {p: round(v["controlled"], 4) for p, v in base["strengths"].items()},
        "largest_half_width": round(half, 4),
        "variants": {
            name: {
                "largest_change": round(
                    max(abs(r["strengths"][p]["controlled"] - v["controlled"]) for p, v in base["strengths"].items()), 4
                ),
                "by_generator": {
                    p: round(r["strengths"][p]["controlled"] - v["controlled"], 4) for p, v in base["strengths"].items()
                },
            }
            for name, r in variants.items()
        },
    }
    if not quick:
        OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    from _repeats import ended

    ended(main())
