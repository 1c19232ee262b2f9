"""PPI++ on simulated studies (vectorised: every study at once) and on a run's judgments with labels."""

import numpy as np
import pandas as pd
import pytest

from genjudge.judging import ppi

STUDIES, N_ALL, N_LABELLED = 1000, 2000, 200


def simulate(seed, p_human, sensitivity, specificity):
    """STUDIES studies: human labels (rate p_human) of N_ALL answers, a judge that says 1 with
    probability `sensitivity` where the human says 1 and 1 - `specificity` where 0 (biased whenever the
    two differ), and a uniform random N_LABELLED of the answers labelled."""
    rng = np.random.default_rng(seed)
    human = (rng.random((STUDIES, N_ALL)) < p_human).astype(float)
    says = np.where(human == 1, sensitivity, 1 - specificity)
    judge = (rng.random((STUDIES, N_ALL)) < says).astype(float)
    order = rng.permutation(N_ALL)  # which answers are labelled (the same random subset shape each study)
    lab, unlab = order[:N_LABELLED], order[N_LABELLED:]
    return human[:, lab], judge[:, lab], judge[:, unlab]


def test_the_interval_covers_the_human_rate_in_95_percent_of_studies_with_a_biased_judge():
    p_human = 0.6
    y, f, fu = simulate(0, p_human, sensitivity=0.92, specificity=0.7)  # the judge says "correct" too often
    judge_rate = np.concatenate([f, fu], axis=1).mean(axis=1)
    assert judge_rate.mean() > p_human + 0.05  # biased: its own rate misses the human one
    out = ppi.ppi_mean(y, f, fu)
    lo, hi = out["ci95"]
    coverage = np.mean((lo <= p_human) & (p_human <= hi))
    assert 0.93 <= coverage <= 0.97, coverage
    assert abs(out["value"].mean() - p_human) < 0.005  # unbiased for the human rate
    # the judge's own 95% intervals, narrow and centred on its bias, almost never cover it
    judge_se = np.sqrt(judge_rate * (1 - judge_rate) / N_ALL)
    assert np.mean(np.abs(judge_rate - p_human) <= 1.96 * judge_se) < 0.05


@pytest.mark.parametrize(
    "p_human, sensitivity, specificity",
    [(0.6, 0.92, 0.7), (0.5, 0.85, 0.8), (0.7, 0.9, 0.9), (0.35, 0.8, 0.85)],
)
def test_ppi_is_narrower_than_the_labels_alone_whenever_the_judge_agrees_80_percent(p_human, sensitivity, specificity):
    y, f, fu = simulate(1, p_human, sensitivity, specificity)
    out = ppi.ppi_mean(y, f, fu)
    width = out["ci95"][1] - out["ci95"][0]
    agree = (y == f).mean(axis=1)
    good = agree >= 0.8
    assert good.sum() > 100  # enough studies where the judge agrees that often
    labels_width = np.array([np.diff(ppi.labels_only(row)["ci95"])[0] for row in y[good]])
    assert np.all(width[good] < labels_width)


def test_lambda_zero_is_the_labels_alone_and_a_perfect_judge_borrows_everything():
    rng = np.random.default_rng(3)
    y = (rng.random(100) < 0.5).astype(float)
    noise = rng.random(900) < 0.5
    out = ppi.ppi_mean(y, rng.random(100) < 0.5, noise)  # a judge unrelated to the labels
    assert out["lambda"] < 0.3
    perfect = ppi.ppi_mean(y, y, noise.astype(float))
    assert perfect["lambda"] == pytest.approx(
        1 / (1 + 100 / 900) * np.var(y) / np.var(np.r_[y, noise], ddof=1), rel=1e-9
    )
    # the closed form by hand for lambda = clip(cov / ((1 + n/N) var), 0, 1)
    lam = perfect["lambda"]
    value = lam * noise.mean() + (y - lam * y).mean()
    assert perfect["value"] == pytest.approx(value)


def test_corrected_gives_three_figures_side_by_side():
    y, f, fu = simulate(4, 0.6, 0.92, 0.7)
    c = ppi.corrected(y[0], f[0], fu[0])
    assert c["n_labelled"] == N_LABELLED and c["n_unlabelled"] == N_ALL - N_LABELLED
    assert c["judge"]["value"] == pytest.approx(np.r_[f[0], fu[0]].mean())
    assert c["labels_only"]["value"] == pytest.approx(y[0].mean())
    lo, hi = c["ppi"]["ci95"]
    assert lo < c["ppi"]["value"] < hi and hi - lo < np.diff(c["labels_only"]["ci95"])[0]
    assert ppi.corrected([1.0], [1.0], [0.0])["ppi"] is None


# --- a run's judgments with a labels file -------------------------------------------------------------


def judgments(generators=("g",), n=400, seed=7):
    """Reference-mode judgments of `generators` on n items in two categories; the judge says correct
    too often (human rate 0.6, judge sensitivity 0.92, specificity 0.7)."""
    rng = np.random.default_rng(seed)
    frames, truth = [], {}
    for g in generators:
        human = rng.random(n) < 0.6
        judge = np.where(human, rng.random(n) < 0.92, rng.random(n) < 0.3)
        truth[g] = human
        frames.append(
            pd.DataFrame(
                {
                    "judge": "j",
                    "generator": g,
                    "dataset": "d",
                    "opponent": None,
                    "id": [f"q{i}" for i in range(n)],
                    "turn": 1,
                    "sample": 0,
                    "category": ["a" if i % 2 else "b" for i in range(n)],
                    "output": [f"{g} answer {i}" for i in range(n)],
                    "verdict": np.where(judge, "correct", "incorrect"),
                }
            )
        )
    return pd.concat(frames, ignore_index=True), truth


def label_section(tmp_path, rows, generator_field=False):
    from genjudge.config import defaults

    path = tmp_path / "labels.jsonl"
    path.write_text("".join(pd.Series(rows).map(lambda r: __import__("json").dumps(r) + "\n")))
    fields = {"generator": "generator"} if generator_field else {}
    return defaults(judge={"labels": {"path": str(path), "fields": fields}})["judge"]["labels"]


def test_a_cell_with_random_labels_gets_ppi_beside_the_judge_and_the_labels(tmp_path):
    from genjudge.judging import modes
    from genjudge.stages.corrected import corrected_figures, markdown

    df, truth = judgments()
    rng = np.random.default_rng(0)
    chosen = sorted(rng.choice(400, 100, replace=False))
    rows = [{"id": f"q{i}", "label": "correct" if truth["g"][i] else "incorrect"} for i in chosen]
    c = corrected_figures(df, label_section(tmp_path, rows), modes.get("reference"), "judge.labels")
    x = c["cells"]["g/d"]
    assert c["measure"] == "share correct" and "refused" not in c
    assert x["n_labelled"] == 100 and x["n_unlabelled"] == 300 and x["warnings"] == []
    assert x["labelled_ids"] == sorted(f"q{i}" for i in chosen)[:20] and x["n_labelled_items"] == 100
    assert x["judge"]["value"] > 0.65  # the judge's own, biased figure
    lo, hi = x["ppi"]["ci95"]
    assert lo <= truth["g"].mean() <= hi  # the corrected one covers the human rate of the cell
    assert hi - lo < np.diff(x["labels_only"]["ci95"])[0]
    md = "\n".join(markdown({"j": c}))
    assert "| judge | cell | measure | judge alone | labels only | PPI++ | lambda | labelled | agreement |" in md
    assert "labelled items (100): q" in md and "Angelopoulos" in md


def test_labels_of_one_category_warn_that_they_are_not_a_random_sample(tmp_path):
    from genjudge.judging import modes
    from genjudge.stages.corrected import corrected_figures

    df, truth = judgments()
    rows = [{"id": f"q{i}", "label": "correct" if truth["g"][i] else "incorrect"} for i in range(1, 200, 2)]
    c = corrected_figures(df, label_section(tmp_path, rows), modes.get("reference"), "judge.labels")
    [w] = c["cells"]["g/d"]["warnings"]
    assert "cover only 1 of the 2 categories (a; none of b)" in w
    # both categories, but three quarters of the labels from one: a chosen sample, said so
    rows = [{"id": f"q{i}", "label": "correct"} for i in [*range(1, 300, 2), *range(0, 100, 2)]]
    c = corrected_figures(df, label_section(tmp_path, rows), modes.get("reference"), "judge.labels")
    [w] = c["cells"]["g/d"]["warnings"]
    assert "differs by category" in w


def test_labels_that_may_be_of_another_generators_answers_are_refused(tmp_path):
    from genjudge.judging import modes
    from genjudge.stages.corrected import corrected_figures, markdown

    df, truth = judgments(("g1", "g2"))
    rows = [{"id": f"q{i}", "label": "correct" if truth["g1"][i] else "incorrect"} for i in range(0, 400, 4)]
    c = corrected_figures(df, label_section(tmp_path, rows), modes.get("reference"), "judge.labels")
    assert c["cells"] == {} and "do not say whose answers" in c["refused"]
    assert "**Not corrected (j):** the labels do not say whose answers" in "\n".join(markdown({"j": c}))
    # Labels naming the generator correct that generator's cell only.
    named = [{**r, "generator": "g1"} for r in rows]
    c = corrected_figures(df, label_section(tmp_path, named, True), modes.get("reference"), "judge.labels")
    assert list(c["cells"]) == ["g1/d"] and "refused" not in c


# --- few labels: the normal interval does not hold, and the report says so ---------------------------


def test_few_or_invariant_labels_give_no_ppi_interval_but_the_reason():
    y20 = np.ones(20)
    c = ppi.corrected(y20, y20, np.r_[np.ones(300), np.zeros(200)])  # every label "correct", the judge agrees
    assert c["ppi"] is None and "0 of each value" not in c["why_not"] and "at least 5 of each value" in c["why_not"]
    assert c["labels_only"]["ci95"][0] < 0.9  # the labels' own interval stands, and is wide
    two = ppi.corrected([1.0, 0.0], [1.0, 0.0], np.r_[np.ones(300), np.zeros(200)])
    assert two["ppi"] is None and "1 of the 2 labels are positive" in two["why_not"]
    scores = ppi.corrected([7.0, 7.0], [7.0, 7.0], np.full(50, 7.0), rate=False)
    assert scores["ppi"] is None and "at least 10" in scores["why_not"]
    same = ppi.corrected(np.full(12, 7.0), np.full(12, 7.0), np.r_[np.full(40, 7.0), np.full(10, 3.0)], rate=False)
    assert same["ppi"] is None and "no variation" in same["why_not"]


@pytest.mark.parametrize("p_human, n", [(0.6, 10), (0.6, 30), (0.9, 30), (0.95, 50), (0.95, 200)])
def test_the_reported_interval_covers_the_human_rate_with_few_labels_too(p_human, n):
    """The interval the report gives (PPI++ where it holds, else the labels' own Wilson interval) covers
    the human rate in at least 93% of 600 simulated studies; plain PPI++ fell to 76% at 10 labels and
    to 92% at 200 labels of a rate of 0.95."""
    rng = np.random.default_rng(11)
    studies, big_n = 600, 500
    human = rng.random((studies, n + big_n)) < p_human
    judge = np.where(human, rng.random(human.shape) < 0.92, rng.random(human.shape) < 0.3).astype(float)
    covered = []
    for h, j in zip(human.astype(float), judge):
        c = ppi.corrected(h[:n], j[:n], j[n:])
        lo, hi = (c["ppi"] or c["labels_only"])["ci95"]
        covered.append(lo <= p_human <= hi)
    assert np.mean(covered) >= 0.93, np.mean(covered)


def test_the_small_sample_form_is_ppi_pythons_with_t_and_unbiased_variances():
    rng = np.random.default_rng(5)
    y, f = (rng.random(40) < 0.5).astype(float), (rng.random(40) < 0.5).astype(float)
    fu = (rng.random(400) < 0.5).astype(float)
    plain, small = ppi.ppi_mean(y, f, fu), ppi.ppi_mean(y, f, fu, small_sample=True)
    assert small["value"] == plain["value"] and small["lambda"] == plain["lambda"]
    lam = plain["lambda"]
    se = np.sqrt(lam**2 * fu.var(ddof=1) / 400 + (y - lam * f).var(ddof=1) / 40)
    from scipy.stats import t

    assert small["ci95"][1] - small["value"] == pytest.approx(t.ppf(0.975, 39) * se)


def test_labels_without_a_dataset_field_are_refused_where_ids_repeat_across_datasets(tmp_path):
    from genjudge.judging import modes
    from genjudge.stages.corrected import corrected_figures

    df, truth = judgments()
    both = pd.concat([df, df.assign(dataset="e")], ignore_index=True)
    rows = [{"id": f"q{i}", "label": "correct" if truth["g"][i] else "incorrect"} for i in range(0, 400, 4)]
    c = corrected_figures(both, label_section(tmp_path, rows), modes.get("reference"), "judge.labels")
    assert c["cells"] == {} and "do not say which dataset" in c["refused"] and "'q0'" in c["refused"]
    one = corrected_figures(df, label_section(tmp_path, rows), modes.get("reference"), "judge.labels")
    assert "refused" not in one and list(one["cells"]) == ["g/d"]


def test_a_random_sample_that_happens_to_miss_a_small_category_is_not_called_chosen(tmp_path):
    from genjudge.stages.corrected import sampling_warnings

    rng = np.random.default_rng(2)
    cell = pd.DataFrame({"category": [f"c{i % 8}" for i in range(80)]})  # 8 categories of 10 answers
    warned = 0
    for _ in range(300):
        labelled = pd.Series(False, cell.index)
        labelled[rng.choice(80, 20, replace=False)] = True
        warned += bool(sampling_warnings(cell, labelled))
    assert warned / 300 <= 0.02  # a random 20 of 80 misses a category of 10 about a third of the time
    chosen = pd.Series([c in ("c0", "c1") for c in cell["category"]])  # 20 labels from two categories
    [w] = sampling_warnings(cell, chosen)
    assert "cover only 2 of the 8 categories (c0, c1; none of c2, c3" in w and "look chosen" in w
