"""pairwise: the candidate against a baseline run's answer, judged in both orders.

Order 0 shows the candidate as A, order 1 as B. A verdict that flips with the
order is position bias, not a preference: it counts as a tie.
"""

from __future__ import annotations

import pandas as pd

from genjudge.data.conversation import placeholders, reference_turns, swapped
from genjudge.data.samples import SampleView, answers_by_row
from genjudge.errors import InputError
from genjudge.judging.items import item_codes, item_rate_where, item_share, rate_of, share_of
from genjudge.judging.modes.base import (
    NO_REFERENCE,
    UNJUDGED,
    WITHHELD,
    WITHHELD_REASONS,
    JudgeCall,
    JudgeMode,
    JudgeRequest,
    checklist_text,
    lacks_reference,
    orders,
    pct,
    rate_text,
    register,
    row_history,
    truncated,
    withheld,
)
from genjudge.judging.reasoning import NOT_FINISHED, UNCLOSED, unfinished
from genjudge.judging.templates import render_request

# Verdicts from the candidate's side, per order.
OUTCOME = {0: {"a": "win", "b": "loss", "tie": "tie"}, 1: {"a": "loss", "b": "win", "tie": "tie"}}
OUTCOMES = ("win", "tie", "loss")
# The headline: the win rate with ties counted half (AlpacaEval's and Chatbot Arena's), a rate over the
# parsed verdicts with its interval; the counts of wins, ties and losses travel with it.
PREFERENCE = {"win": 1.0, "tie": 0.5, "loss": 0.0}
COUNTS = {"win": "wins", "tie": "ties", "loss": "losses"}


def win_rate(parsed: pd.DataFrame) -> dict:
    """(wins + ties / 2) over the parsed verdicts, clustered by item, with `wins`, `ties`, `losses` (verdicts)."""
    out = item_share(parsed, parsed["verdict"].map(PREFERENCE))
    return {**out, **_counts(parsed["verdict"])}


def _counts(verdict: pd.Series) -> dict:
    return {COUNTS[o]: int((verdict == o).sum()) for o in OUTCOMES}


def outcomes_text(v: dict) -> str:
    """`2 wins, 115 ties, 3 losses` of a win rate's counts (verdicts)."""
    return ", ".join(f"{v.get(COUNTS[o], 0)} {COUNTS[o] if v.get(COUNTS[o], 0) != 1 else o}" for o in OUTCOMES)


def answers_by_turn(path) -> dict:
    """A generations file's answers by (id, turn, sample); a file without turns is turn 1, without samples sample 0."""
    import pyarrow.parquet as pq

    names = pq.read_schema(path).names
    wanted = ("id", "turn", "sample", "output", "reasoning_state", "finish_reason")
    df = pd.read_parquet(path, columns=[c for c in wanted if c in names])
    if "reasoning_state" in df:  # no answer where the trace never closed: None, never judged
        df["output"] = df["output"].astype(object).where(df["reasoning_state"] != UNCLOSED, None)
    if "finish_reason" in df:  # withheld by the provider (on_filtered: count_wrong): loses, never judged
        df["output"] = df["output"].astype(object).where(~df["finish_reason"].isin(WITHHELD_REASONS), WITHHELD_ANSWER)
    return answers_by_row(df)


class Withheld(str):
    """The answer a provider withheld (kept under endpoint.on_filtered: count_wrong): an empty text that
    says so."""


WITHHELD_ANSWER = Withheld("")
# Which side's answer was withheld -> the candidate's outcome.
WITHHELD_OUTCOME = {"candidate": "loss", "opponent": "win", "both": "tie"}


def load_baseline(path, keys) -> dict:
    """The outside baseline's answers by (id, turn, sample); every (id, turn) of `keys` must have one."""
    try:
        answers = answers_by_turn(path)
    except FileNotFoundError:
        raise InputError(f"judge.baseline: {path!r} not found") from None
    missing = [k for k in keys if k not in SampleView(answers, 0)]
    if missing:
        shown = [k[0] if k[1] == 1 else k for k in missing[:5]]
        raise InputError(f"judge.baseline: {path} has no answer for {len(missing)} id(s), e.g. {shown}")
    return answers


class Pairwise(JudgeMode):
    name = "pairwise"
    placeholders = frozenset({"question", "reference", "answer_a", "answer_b"})
    graded = (("answer_a",), ("answer_b",))
    pattern = r"VERDICT:\s*\**\s*\[{0,2}(A|B|TIE)\]{0,2}(?![A-Za-z])"
    labels = {"A": "a", "B": "b", "TIE": "tie", "C": "tie"}  # C: FastChat's [[C]] for a tie
    marker = "VERDICT"
    needs_baseline = True
    requests_per_item = 2
    headline_rule = (
        "wins + ties / 2 over the answers with a parsed verdict; each answer is judged in both orders, and a "
        "verdict that changes with the order is a tie"
    )

    def answer_value(self, verdict) -> float | None:
        return PREFERENCE.get(verdict)

    def judge_calls(self, row) -> list[JudgeCall]:
        """Both orders, each read from the candidate's side (win, tie, loss)."""
        outcomes = (getattr(row, "outcome_order0", None), getattr(row, "outcome_order1", None))
        return [
            JudgeCall(order, o if isinstance(o, str) else None, f"candidate shown as {side}")
            for order, (o, side) in enumerate(zip(outcomes, "AB"))
        ]

    def requests(self, gens, spec, template, opponent=None, answer=None):
        """`opponent`: the other generator's answers by (id, turn, sample); None: those of the outside
        `judge.baseline` file. Sample s meets the opponent's sample s, or its only one."""
        turns = gens["turn"].astype(int).tolist() if "turn" in gens else [1] * len(gens)
        samples = gens["sample"].astype(int).tolist() if "sample" in gens else [0] * len(gens)
        keys = list(zip(gens["id"], turns))
        baseline = opponent if opponent is not None else load_baseline(spec.baseline, keys)
        missing = [k for k, s in zip(keys, samples) if k not in SampleView(baseline, s)]
        if missing:
            shown = [k[0] if k[1] == 1 else k for k in missing[:5]]
            raise InputError(f"the opponent has no answer for {len(missing)} id(s), e.g. {shown}")
        ref_turns = reference_turns(template)
        out = []
        for row, turn, sample in zip(gens.itertuples(), turns, samples):
            theirs = SampleView(baseline, sample)
            history = row_history(row)
            if lacks_reference(history, self.needs_reference, ref_turns):
                out += [JudgeRequest(row.id, order, NO_REFERENCE, None, turn, sample) for order in (0, 1)]
                continue
            if unfinished(row) or theirs[(row.id, turn)] is None:  # a side without an answer: no judge call
                out += [JudgeRequest(row.id, order, NOT_FINISHED, None, turn, sample) for order in (0, 1)]
                continue
            sides = [
                s
                for s, w in (("candidate", withheld(row)), ("opponent", isinstance(theirs[(row.id, turn)], Withheld)))
                if w
            ]
            if sides:  # the withheld side loses, without a judge call
                side = "both" if len(sides) == 2 else sides[0]
                out += [JudgeRequest(row.id, order, f"{WITHHELD}: {side}", None, turn, sample) for order in (0, 1)]
                continue
            values = placeholders(history, theirs, row.id)
            pair = (row.output, theirs[(row.id, turn)])
            for order, (a, b) in enumerate((pair, pair[::-1])):
                text = render_request(
                    template,
                    f"item {row.id!r}" + (f", turn {turn}" if turn > 1 or len(history) > 1 else ""),
                    question=row.prompt,
                    reference=row.reference,
                    answer_a=a,
                    answer_b=b,
                    checklist=checklist_text(row),
                    turn=turn,
                    **(values if order == 0 else swapped(values)),
                )
                out.append(JudgeRequest(row.id, order, "judge", text, turn, sample))
        return out

    def parse(self, df, raw, pattern, options=None):
        rx = self.compile(pattern)
        first, second = orders(raw, df, 0), orders(raw, df, 1)
        df["decided_by"] = first["decided_by"].to_numpy()
        df["judge_output"] = first["judge_output"].to_numpy()
        df["p_correct"] = first["p_correct"].to_numpy()
        df["judge_output_swapped"] = second["judge_output"].to_numpy()
        verdicts, reasons, details, o0s, o1s, consistent = [], [], [], [], [], []
        f0 = first["judge_finish_reason"] if "judge_finish_reason" in first else [None] * len(df)
        f1 = second["judge_finish_reason"] if "judge_finish_reason" in second else [None] * len(df)
        for d, t0, t1, e0, e1 in zip(df["decided_by"], df["judge_output"], df["judge_output_swapped"], f0, f1):
            if isinstance(d, str) and d.startswith(f"{WITHHELD}: "):
                outcome = WITHHELD_OUTCOME[d.split(": ", 1)[1]]
                verdicts.append(outcome)
                reasons.append(None)
                details.append(None)
                o0s.append(outcome)
                o1s.append(outcome)
                consistent.append(None)
                continue
            if d in UNJUDGED:
                verdicts.append(None)
                reasons.append(UNJUDGED[d])
                details.append(None)
                o0s.append(None)
                o1s.append(None)
                consistent.append(None)
                continue
            p0 = truncated(self.parse_text(t0, rx, bool(pattern)), e0, t0)
            p1 = truncated(self.parse_text(t1, rx, bool(pattern)), e1, t1)
            o0 = OUTCOME[0].get(p0.verdict) if p0.verdict else None
            o1 = OUTCOME[1].get(p1.verdict) if p1.verdict else None
            o0s.append(o0)
            o1s.append(o1)
            if o0 is None or o1 is None:
                verdicts.append(None)
                reasons.append("; ".join(f"order {i}: {p.reason}" for i, p in enumerate((p0, p1)) if p.reason))
                details.append(
                    "; ".join(f"order {i}: {p.detail}" for i, p in enumerate((p0, p1)) if p.reason and p.detail) or None
                )
                consistent.append(None)
            else:
                consistent.append(o0 == o1)
                verdicts.append(o0 if o0 == o1 else "tie")
                reasons.append(None)
                details.append(None)
        df["verdict"], df["unparsed_reason"], df["unparsed_detail"] = verdicts, reasons, details
        df["outcome_order0"], df["outcome_order1"], df["position_consistent"] = o0s, o1s, consistent
        return df

    def metrics(self, g: pd.DataFrame) -> dict:
        # win_rate and share over the parsed rows, their items coded once, without building those rows' frame
        has = g["verdict"].notna().to_numpy()
        codes, n = item_codes(g, has)
        verdict = g["verdict"][has]
        out = {"win_rate": {**share_of(codes, n, verdict.map(PREFERENCE).astype(float).to_numpy()), **_counts(verdict)}}
        out.update({k: rate_of(codes, n, (verdict == k).astype(bool).to_numpy()) for k in OUTCOMES})
        consistent = g["position_consistent"]
        cons = has & consistent.notna().to_numpy()
        out["position_consistency"] = item_rate_where(g, cons, consistent[cons].astype(bool))
        return out

    def headline(self, s: dict) -> list[tuple[str, str]]:
        # The opponent is a generator of the run (its name), or the outside `judge.baseline` file.
        opponent = next((r["opponent"] for r in s.get("leaderboard") or [] if r.get("opponent")), None)
        vs = f"vs {opponent or 'baseline'}"
        w = s["win_rate"]
        rows = [
            (f"win rate ({vs}; ties count half)", rate_text(w)),
            ("wins / ties / losses (verdicts)", outcomes_text(w)),
        ]
        rows += [(f"{k} share ({vs})", rate_text(s[k])) for k in OUTCOMES]
        rows.append(("position consistency", rate_text(s["position_consistency"])))
        return rows

    def across_cells(self, df: pd.DataFrame, seed: int = 0) -> dict:
        """Bradley-Terry strengths per dataset from every pair judged (ties count half), with 95%
        bootstrap intervals over items; where generators of the run met each other (`pairs: all`,
        or a generator as the baseline), two of them included."""
        from genjudge.judging.stats import bradley_terry_intervals

        games = df[df["opponent"].notna() & df["verdict"].notna()]
        if games.empty or len(set(games["generator"]) | set(games["opponent"])) < 2:
            return {}
        score = {"win": 1.0, "tie": 0.5, "loss": 0.0}
        out = {}
        for dataset, d in games.groupby("dataset", sort=True):
            groups = [
                [(r.generator, r.opponent, score[r.verdict]) for r in g.itertuples()]
                for _, g in d.groupby("id", sort=True)
            ]
            out[str(dataset)] = bradley_terry_intervals(groups, seed=seed)
        return {"bradley_terry": out}

    def over_samples(self, df):
        from genjudge.judging.sampling_stats import pairwise_measures

        return pairwise_measures(df, OUTCOMES)

    def leaderboard(self, s: dict) -> dict:
        return {k: s[k] for k in ("win_rate", *OUTCOMES, "position_consistency")}

    def leaderboard_measure(self):
        return "win_rate", "rate"

    def category_column(self):
        return (
            "win rate (ties half); win / tie / loss",
            lambda c: f"{rate_text(c['win_rate'])}; " + " / ".join(pct(c[k]["value"]) for k in OUTCOMES),
        )


register(Pairwise())
