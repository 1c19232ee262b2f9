"""What each model of a run is asked, before anything runs: the requests per dataset and turn,
with their prompt lengths estimated from the dataset and the judge templates (torch-free).

A generator answers every (item, turn, sample); its prompt for turn k holds the system prompt,
questions 1..k and its own k-1 earlier answers. A judge answers every (item, turn, sample) of the
cells it grades, twice for pairwise (both orders); its prompt is the template chosen for that
item's category and turn with each placeholder the template uses filled in: FastChat's turn-2
templates hold {answer_1} and {answer_2}, so a turn-2 request carries both answers. Answers are
counted at max_new_tokens (an upper bound) unless a run measured their mean length.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass, field
from pathlib import Path

from genjudge.data.conversation import TURN_PLACEHOLDER, item_turns
from genjudge.planning.time_model import Requests

CHARS_PER_TOKEN = 4  # a rough average for English text under BPE tokenizers


def tokens(chars: float) -> float:
    return chars / CHARS_PER_TOKEN


@dataclass
class Workload:
    """One model's requests: per dataset, one Requests per turn; and the longest prompt."""

    requests: dict = field(default_factory=dict)  # dataset -> [Requests]
    longest: int = 0  # tokens, for the KV cache of the worst batch
    how: str = ""

    def all(self) -> list[Requests]:
        return [r for rs in self.requests.values() for r in rs]

    @property
    def n(self) -> float:
        return sum(r.n for r in self.all())


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def generator_workload(items_by_dataset: dict, section: dict, answer_tokens: float | None = None) -> Workload:
    """A generator's requests on each dataset (`items_by_dataset`: name -> the item table)."""
    answer = section["max_new_tokens"] if answer_tokens is None else answer_tokens
    system = len(section.get("system_prompt") or "")
    out = Workload()
    longest = (0, "")
    for name, items in items_by_dataset.items():
        by_turn: dict[int, list[float]] = {}
        turns = items["turns"] if "turns" in items else [None] * len(items)
        for prompt, ref, conv in zip(items["prompt"], items["reference"], turns):
            chars = system
            for k, turn in enumerate(item_turns(prompt, ref, conv), start=1):
                chars += len(str(turn["question"]))
                by_turn.setdefault(k, []).append(tokens(chars) + (k - 1) * answer)
        groups = []
        for k, lengths in sorted(by_turn.items()):
            groups.append(
                Requests(len(lengths) * section["n_samples"], _mean(lengths), section["max_new_tokens"], f"turn {k}")
            )
            top = max(lengths)
            if top > longest[0]:
                longest = (top, f"{name}, turn {k}" + (" (earlier turns and answers included)" if k > 1 else ""))
        out.requests[name] = groups
    out.longest = math.ceil(longest[0])
    out.how = (
        f"longest prompt: {longest[1]}, ~{CHARS_PER_TOKEN} chars/token"
        + (f", earlier answers at {answer:.0f} tokens" if any(len(g) > 1 for g in out.requests.values()) else "")
        if longest[1]
        else "no items"
    )
    return out


def _placeholders(text: str) -> tuple[int, list[str]]:
    """(characters of the template outside its placeholders, the placeholder names in order)."""
    fixed, names = 0, []
    for literal, name, _, _ in string.Formatter().parse(text):
        fixed += len(literal)
        if name:
            names.append(name)
    return fixed, names


def _value_tokens(name: str, k: int, turns: list[dict], answer: float, opponent: float) -> float:
    """Estimated tokens of one placeholder of a turn-k request."""
    if name in ("candidate", "answer", "answer_a"):
        return answer
    if name == "answer_b":
        return opponent
    if name == "question":
        return tokens(len(str(turns[k - 1]["question"])))
    if name == "conversation":  # the conversation up to the turn, its answer last
        return sum(tokens(len(str(t["question"]))) + answer for t in turns[:k])
    if name == "reference":
        ref = turns[k - 1].get("reference")
        return tokens(len(str(ref))) if ref is not None else 0
    m = TURN_PLACEHOLDER.match(name)
    if not m or int(m.group(2)) > len(turns):
        return 0
    what, j = m.group(1), int(m.group(2))
    if what == "question":
        return tokens(len(str(turns[j - 1]["question"])))
    if what == "ref_answer":
        ref = turns[j - 1].get("reference")
        return tokens(len(str(ref))) if ref is not None else 0
    return opponent if what == "answer_b" else answer


def _calls(requests_per_item, rubric) -> tuple[int, float]:
    """(judge calls of one answer, mean tokens of its criterion where each call shows one)."""
    if isinstance(requests_per_item, int):
        return requests_per_item, 0.0
    from types import SimpleNamespace

    from genjudge.data.rubrics import rubric_of

    calls = requests_per_item.requests_of(SimpleNamespace(rubric=rubric))
    criteria = rubric_of(rubric) or []
    extra = sum(tokens(len(c["criterion"]) + 8) for c in criteria) / len(criteria) if criteria else 0.0
    return calls, extra


def read_template(path: str, workflow_dir: Path | None = None) -> str:
    p = Path(path)
    if not p.exists() and workflow_dir is not None and (workflow_dir / path).exists():
        p = workflow_dir / path
    return p.read_text(encoding="utf-8")


def judge_workload(
    items_by_dataset: dict,
    judge: dict,
    cells: list,
    generators: dict,
    default_template: str,
    requests_per_item,
    answer_tokens: dict | None = None,
    workflow_dir: Path | None = None,
) -> Workload:
    """A judge's requests over its `cells` (experiment.Cell) on each dataset. `answer_tokens`:
    generator name -> measured mean answer tokens (else its max_new_tokens). `requests_per_item`: the
    judge calls one answer takes, or the mode (whose `requests_of` says it item by item: a rubric's
    criteria, each sized with its own text)."""
    from genjudge.data.dataset import is_missing
    from genjudge.judging.template_rules import rules_of

    answer_tokens = answer_tokens or {}
    rules = rules_of(judge.get("templates"))
    texts: dict[str, tuple[int, list[str]]] = {}

    def template(category, k):
        category = None if is_missing(category) else category
        path = next((r.template for r in rules if r.matches(category, k)), default_template)
        if path not in texts:
            texts[path] = _placeholders(read_template(path, workflow_dir))
        return texts[path]

    def answer_of(g):
        return answer_tokens.get(g, generators[g]["max_new_tokens"])

    new_tokens = 0 if judge["verdict"] == "logprob" else judge["max_new_tokens"]
    out = Workload()
    longest = (0.0, "")
    per: dict[tuple, list] = {}
    for cell in cells:
        items = items_by_dataset[cell.dataset]
        samples = generators[cell.generator]["n_samples"]
        a = answer_of(cell.generator)
        b = answer_of(cell.opponent) if cell.opponent else a  # an outside baseline: sized as the candidate
        turns_col = items["turns"] if "turns" in items else [None] * len(items)
        categories = items["category"] if "category" in items else [None] * len(items)
        rubrics = items["rubric"] if "rubric" in items else [None] * len(items)
        for prompt, ref, conv, cat, rubric in zip(items["prompt"], items["reference"], turns_col, categories, rubrics):
            turns = item_turns(prompt, ref, conv)
            calls, extra = _calls(requests_per_item, rubric)
            for k in range(1, len(turns) + 1):
                fixed, names = template(cat, k)
                size = tokens(fixed) + sum(_value_tokens(n, k, turns, a, b) for n in names)
                size += extra if {"rubric_item", "criterion"} & set(names) else 0
                per.setdefault((cell.dataset, k), []).append((size, samples * calls))
                if size > longest[0]:
                    longest = (size, f"{cell.dataset}, turn {k}")
    for (dataset, k), sized in sorted(per.items()):
        n = sum(w for _, w in sized)
        mean = sum(s * w for s, w in sized) / n if n else 0.0
        out.requests.setdefault(dataset, []).append(Requests(n, mean, new_tokens, f"turn {k}"))
    out.longest = math.ceil(longest[0])
    used = sorted({g for cell in cells for g in (cell.generator, cell.opponent) if g})
    measured = [g for g in used if g in answer_tokens]
    bound = [g for g in used if g not in answer_tokens]
    if not bound:
        sized_at = "answers at their measured mean length"
    elif not measured:
        sized_at = "answers at the generators' max_new_tokens (an upper bound)"
    else:  # a calibration that measured some of them: say which figure is which
        sized_at = (
            f"answers of {', '.join(measured)} at their measured mean length, of {', '.join(bound)} at "
            "max_new_tokens (an upper bound: no run measured them)"
        )
    out.how = (
        f"longest prompt: {longest[1]}: the template with the question, reference and every answer it "
        f"holds (~{CHARS_PER_TOKEN} chars/token, {sized_at})"
    )
    return out
