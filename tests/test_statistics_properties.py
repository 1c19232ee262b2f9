"""Properties every statistic of the report keeps, on inputs hypothesis makes up (no model, no
workflow): a kappa is not defined exactly when its expected agreement is 1."""

from collections import Counter

from hypothesis import given
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
