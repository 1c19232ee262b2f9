"""Answer extraction chosen per item, by category: one dataset mixing numeric, multiple-choice and
free-text questions, as `judge.templates` chooses templates:

    dataset:
      answer:
        reference: null                      # every item no rule matches: whole texts
        candidate: null
        by_category:
          - {categories: [arithmetic, word_problems], reference: gsm8k, candidate: last_number}
          - {categories: [multiple_choice], candidate: choice}

The first rule listing an item's category applies, with both of its methods: a side it leaves out
is null (the whole text), never the plain setting's. `answer.reference` and `answer.candidate`
apply to the rest (items without a category among them). Exact match and the cascade read each
item's methods from here; the rules are checked while planning (config.checks).
"""

from __future__ import annotations

from genjudge.data.dataset import is_missing

SIDES = ("reference", "candidate")


def methods_for(answer: dict | None, category) -> dict:
    """{reference, candidate}: the extraction methods of an item of `category` under a dataset's
    `answer` setting (its plain methods and `by_category` rules)."""
    answer = answer or {}
    if not is_missing(category):
        for rule in answer.get("by_category") or []:
            if category in rule["categories"]:
                return {side: rule.get(side) for side in SIDES}
    return {side: answer.get(side) for side in SIDES}


def methods_of(answer: dict | None) -> list[tuple[str, str | None]]:
    """(the key below `answer`, method) of every method the setting names, plain and by category."""
    answer = answer or {}
    out = [(side, answer.get(side)) for side in SIDES]
    for i, rule in enumerate(answer.get("by_category") or []):
        out += [(f"by_category[{i}].{side}", rule.get(side)) for side in SIDES]
    return out


def extracts(answer: dict | None) -> bool:
    """Whether the setting extracts an answer from any item's texts (plainly or for some category)."""
    return any(method for _, method in methods_of(answer))


def as_param(answer: dict | None) -> dict:
    """The setting as a rerun parameter: without an empty `by_category`, so that runs from before
    the rules existed keep their parameters (no rerun)."""
    return {k: v for k, v in (answer or {}).items() if not (k == "by_category" and not v)}
