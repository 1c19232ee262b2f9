"""Properties every statistic of the report keeps, on inputs hypothesis makes up (no model, no
workflow): a kappa is not defined exactly when its expected agreement is 1; rates and their
intervals stay within [0, 1]; a paired difference of a generator with itself is 0 and
swapping the two generators negates it."""

from collections import Counter

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from genjudge.judging import agreement

LABELS = st.sampled_from(["correct", "incorrect", "partial"])


@st.composite
def two_raters(draw):
    n = draw(st.integers(1, 30))
    return draw(st.lists(LABELS, min_size=n, max_size=n)), draw(st.lists(LABELS, min_size=n, max_size=n))


@given(two_raters())
def test_cohen_kappa_is_undefined_exactly_when_the_expected_agreement_is_one(pair):
    a, b = pair
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[k] * cb[k] for k in ca) / len(a) ** 2
    value, why = agreement.cohen_kappa(a, b)
    assert (value is None) == (p_e == 1) == (why is not None)
    if value is not None:
        assert -1 - 1e-9 <= value <= 1 + 1e-9


@given(st.integers(2, 5), st.lists(st.lists(LABELS, min_size=5, max_size=5), min_size=1, max_size=20))
def test_fleiss_kappa_is_undefined_exactly_when_every_vote_is_one_category(m, votes):
    cats, table = agreement.count_table([v[:m] for v in votes], ["correct", "incorrect", "partial"])
    totals = [sum(r[j] for r in table) for j in range(len(cats))]
    p_e = sum((t / sum(totals)) ** 2 for t in totals)
    value, why = agreement.fleiss_kappa(table, cats)
    assert (value is None) == (abs(p_e - 1) < 1e-12) == (why is not None)
    if value is not None:
        assert value <= 1 + 1e-9


# --- rates and their intervals stay in [0, 1] ----------------------------------------------------


def within_unit(r: dict) -> bool:
    lo, hi = r["ci95"]
    return 0 <= lo <= r["value"] <= hi <= 1


@st.composite
def clusters(draw):
    trials = draw(st.lists(st.integers(1, 6), min_size=1, max_size=25))
    return [draw(st.integers(0, t)) for t in trials], trials


@given(clusters())
def test_a_clustered_rate_and_its_interval_stay_within_zero_and_one(data):
    from genjudge.judging.stats import clustered_rate, wilson_interval

    successes, trials = data
    r = clustered_rate(successes, trials)
    assert r["value"] == pytest.approx(sum(successes) / sum(trials)) and within_unit(r)
    assert r["n"] == len(trials)
    if all(t == 1 for t in trials):  # one answer per item: the plain Wilson interval
        assert r["ci95"] == pytest.approx(list(wilson_interval(sum(successes), len(trials))))


VERDICTS = st.sampled_from(["correct", "incorrect", None])


@st.composite
def sampled_items(draw):
    n_items, n_samples = draw(st.integers(1, 12)), draw(st.integers(1, 4))
    rows = [
        (f"q{i}", s, draw(st.sampled_from(["1", "2", "3"])), draw(VERDICTS))
        for i in range(n_items)
        for s in range(n_samples)
    ]
    df = pd.DataFrame(rows, columns=["id", "sample", "output", "verdict"])
    return df.assign(exact_match=df["output"] == "1", answer_extracted=None)


@settings(deadline=None)
@given(sampled_items())
def test_every_rate_over_samples_and_items_stays_within_zero_and_one(df):
    from genjudge.judging.items import item_rate
    from genjudge.judging.sampling_stats import reference_measures

    m = reference_measures(df)
    rates = [v for v in m.values() if isinstance(v, dict) and "ci95" in v]
    rates += list(m["pass_at_k"].values())
    parsed = df[df["verdict"].notna()]
    rates.append(item_rate(parsed, parsed["verdict"] == "correct"))
    for r in rates:
        if r["value"] is not None and r["ci95"] is not None:
            assert within_unit(r), r


# --- paired differences between generators ------------------------------------------------------


@st.composite
def per_item(draw, binary=True):
    """Two generators' per-item (num, den) over the same items."""
    n = draw(st.integers(1, 10))  # scipy's Wilcoxon permutes all 2**n signs of a small sample with ties
    dens = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))

    def side():
        if binary:
            nums = [draw(st.integers(0, d)) for d in dens]
        else:
            nums = [sum(draw(st.lists(st.integers(1, 10), min_size=d, max_size=d))) for d in dens]
        return pd.DataFrame({"num": nums, "den": dens}, index=[f"q{i}" for i in range(n)], dtype=float)

    return side(), side()


@settings(deadline=None, max_examples=40)
@given(st.booleans(), st.data())
def test_a_generator_against_itself_differs_by_zero_with_an_interval_holding_zero(binary, data):
    from genjudge.judging.paired import paired_difference

    a, _ = data.draw(per_item(binary))
    d = paired_difference(a, a.copy(), binary=binary, n_resamples=200)
    assert d["difference"] == 0 and d["p_value"] == 1.0
    if d["ci95"]:
        assert d["ci95"][0] <= 0 <= d["ci95"][1]


@settings(deadline=None, max_examples=40)
@given(st.booleans(), st.data())
def test_swapping_the_two_generators_negates_the_difference_and_its_interval(binary, data):
    from genjudge.judging.paired import paired_difference

    a, b = data.draw(per_item(binary))
    ab = paired_difference(a, b, binary=binary, n_resamples=200)
    ba = paired_difference(b, a, binary=binary, n_resamples=200)
    assert ba["difference"] == pytest.approx(-ab["difference"])
    if ab["ci95"]:
        assert ba["ci95"] == pytest.approx([-ab["ci95"][1], -ab["ci95"][0]])
    assert ba["p_value"] == pytest.approx(ab["p_value"])
