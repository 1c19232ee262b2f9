"""Length-controlled win rates (AlpacaEval 2.0) and style-controlled Bradley-Terry (Chatbot Arena) on
planted pairwise verdicts, each checked against an independent statsmodels fit."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf

from genjudge.judging import length_control, style_control
from genjudge.stages import controlled

N = 240


def planted(generator: str, seed: int, p_longer: float, win_when_longer=0.9, win_when_shorter=0.1):
    """A generator against the baseline on N items: it wins (mostly) only when its answer is longer."""
    rng = np.random.default_rng(seed)
    base_len = rng.integers(350, 700, N)
    longer = rng.random(N) < p_longer
    gap = rng.integers(20, 300, N)  # the same spread of differences either way
    cand_len = np.where(longer, base_len + gap, base_len - gap)
    wins = rng.random(N) < np.where(longer, win_when_longer, win_when_shorter)
    ties = rng.random(N) < 0.1
    verdict = np.where(ties, "tie", np.where(wins, "win", "loss"))
    return pd.DataFrame(
        {
            "judge": "j",
            "generator": generator,
            "dataset": "d",
            "opponent": "base",
            "id": [f"q{i}" for i in range(N)],
            "turn": 1,
            "sample": 0,
            "verdict": verdict,
            "output": ["x" * int(n) for n in cand_len],
            "opponent_output": ["y" * int(n) for n in base_len],
        }
    )


def exp_of(pairs="baseline"):
    return SimpleNamespace(judges={"j": {"mode": "pairwise", "pairs": pairs, "baseline": "base"}})


PREF = {"win": 1.0, "tie": 0.5, "loss": 0.0}


def test_the_length_controlled_win_rate_moves_to_half_when_only_length_wins():
    df = planted("verbose", seed=1, p_longer=0.75)
    lc = controlled.controlled(exp_of(), {"j": df})["j"]["length_controlled"]["d"]["verbose"]
    raw = df["verdict"].map(PREF).mean()
    assert lc["raw"] == pytest.approx(raw)
    assert raw > 0.65  # the judge's raw preference: a clear win
    assert abs(lc["value"] - 0.5) < 0.06 and abs(lc["value"] - 0.5) < abs(raw - 0.5) / 3
    assert lc["coefficients"]["length"] > 1.0 and not lc["instruction_term"] and not lc["penalised"]
    assert lc["ci95"][0] < lc["value"] < lc["ci95"][1] and lc["raw_ci95"][0] > 0.55
    # The same GLM fitted independently with statsmodels' formula interface, predicted at no length difference.
    d = pd.DataFrame({"y": df["verdict"].map(PREF), "delta": df["output"].str.len() - df["opponent_output"].str.len()})
    d["std_delta"] = d["delta"] / d["delta"].std()
    fit = smf.glm("y ~ np.tanh(std_delta)", d, family=sm.families.Binomial()).fit()
    expected = fit.predict(d.assign(std_delta=0.0)).mean()
    assert lc["value"] == pytest.approx(expected, abs=1e-9)
    assert lc["coefficients"]["length"] == pytest.approx(fit.params["np.tanh(std_delta)"], abs=1e-8)


def test_a_generator_that_wins_on_substance_keeps_its_lead():
    # Wins 80% whatever the length: controlling for length changes little.
    df = planted("good", seed=2, p_longer=0.5, win_when_longer=0.8, win_when_shorter=0.8)
    lc = controlled.controlled(exp_of(), {"j": df})["j"]["length_controlled"]["d"]["good"]
    assert abs(lc["value"] - lc["raw"]) < 0.05 and lc["value"] > 0.7


def test_with_several_generators_the_instruction_term_is_the_other_generators_difficulty():
    a, b = planted("a", seed=3, p_longer=0.7), planted("b", seed=4, p_longer=0.4)
    lc = controlled.controlled(exp_of(), {"j": pd.concat([a, b], ignore_index=True)})["j"]["length_controlled"]["d"]
    assert lc["a"]["instruction_term"] and set(lc["a"]["coefficients"]) == {"model", "length", "instruction"}
    # Independently: gamma_x from b's outcomes for a's fit (logit of (sum + 0.5) / (n + 1)).
    pb = (b["verdict"].map(PREF) + 0.5) / 2.0
    d = pd.DataFrame(
        {
            "y": a["verdict"].map(PREF),
            "delta": a["output"].str.len() - a["opponent_output"].str.len(),
            "gamma": np.log(pb / (1 - pb)).to_numpy(),
        }
    )
    d["std_delta"] = d["delta"] / d["delta"].std()
    fit = smf.glm("y ~ np.tanh(std_delta) + gamma", d, family=sm.families.Binomial()).fit()
    assert lc["a"]["value"] == pytest.approx(fit.predict(d.assign(std_delta=0.0)).mean(), abs=1e-9)
    assert lc["a"]["coefficients"]["instruction"] == pytest.approx(fit.params["gamma"], abs=1e-8)


def test_one_outcome_throughout_needs_no_fit_and_separation_falls_back_to_a_ridge():
    frame = pd.DataFrame({"item": ["a", "b", "c"], "y": [1.0, 1.0, 1.0], "delta": [5, -3, 2]})
    assert length_control.lc_win_rate(frame, n_boot=0)["value"] == 1.0
    # wins exactly when longer: the unpenalised MLE diverges
    sep = pd.DataFrame({"item": list("abcdef"), "y": [1.0, 1, 1, 0, 0, 0], "delta": [5, 9, 2, -4, -8, -1]})
    r = length_control.lc_win_rate(sep, n_boot=0)
    assert r["penalised"] and 0.3 < r["value"] < 0.7


def arena(seed=5, n=150):
    """Three generators, every pair; 'fancy' wins when it is longer and bolder, never on substance."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        for a, b in (("fancy", "plain"), ("fancy", "solid"), ("plain", "solid")):
            la, lb = int(rng.integers(50, 300)), int(rng.integers(50, 300))
            if a == "fancy":
                la += 150
            # bold often in fancy's answers, sometimes in the others' (never one player's mark alone)
            bold_a = rng.random() < (0.7 if a == "fancy" else 0.2)
            text_a = ("**bold** " if bold_a else "") + "a" * la
            text_b = ("**bold** " if rng.random() < 0.2 else "") + "b" * lb
            # the judge's preference: length (the relative difference, as the covariate has it) and solid's substance
            p = 1 / (1 + np.exp(-(5.0 * (la - lb) / (la + lb) + (-0.8 if b == "solid" else 0.0))))
            y = float(rng.random() < p)
            rows.append(
                {
                    "judge": "j",
                    "generator": a,
                    "dataset": "d",
                    "opponent": b,
                    "id": f"q{i}",
                    "turn": 1,
                    "verdict": {1.0: "win", 0.0: "loss"}[y],
                    "output": text_a,
                    "opponent_output": text_b,
                }
            )
    return pd.DataFrame(rows)


def test_style_control_moves_the_verbose_generator_down_and_matches_statsmodels():
    df = arena()
    sc = controlled.controlled(exp_of("all"), {"j": df})["j"]
    assert "length_controlled" not in sc
    r = sc["style_controlled"]["d"]
    s = r["strengths"]
    assert s["fancy"]["raw"] > s["solid"]["raw"]  # raw: the verbose one looks best
    assert s["fancy"]["controlled"] < s["fancy"]["raw"] - 0.3
    assert max(s, key=lambda p: s[p]["controlled"]) == "solid"  # controlled: substance wins
    assert r["coefficients"]["length"]["value"] > 0.5 and r["coefficients"]["length"]["ci95"][0] > 0
    # Independently: +1/-1 player columns (reference: the first player), the normalised style differences.
    games = df.assign(y=df["verdict"].map(PREF))
    players = sorted(set(games["generator"]) | set(games["opponent"]))
    X = pd.DataFrame({p: (games["generator"] == p) * 1.0 - (games["opponent"] == p) * 1.0 for p in players[1:]})
    feats = {}
    for f in ("length", "bold"):
        fa = pd.Series([style_control.style(t)[f] for t in games["output"]], dtype=float)
        fb = pd.Series([style_control.style(t)[f] for t in games["opponent_output"]], dtype=float)
        diff = ((fa - fb) / (fa + fb)).fillna(0.0)
        feats[f] = diff / np.sqrt((diff**2).mean())  # unit variance over both orientations of each pair
    X = pd.concat([X, pd.DataFrame(feats)], axis=1)
    fit = sm.GLM(games["y"].to_numpy(), X, family=sm.families.Binomial()).fit()
    beta = pd.Series([0.0, *fit.params[players[1:]]], index=players)
    beta -= beta.mean()
    for p in players:
        assert s[p]["controlled"] == pytest.approx(beta[p], abs=1e-7)
    assert r["coefficients"]["bold"]["value"] == pytest.approx(fit.params["bold"], abs=1e-7)
    assert set(r["coefficients"]) == {"length", "bold"}  # no headers or lists: nothing to fit


def test_the_markdown_shows_raw_beside_controlled_with_each_coefficient():
    across = controlled.controlled(exp_of(), {"j": planted("verbose", seed=1, p_longer=0.75)})
    md = "\n".join(controlled.markdown(across))
    assert (
        "| judge | dataset | generator | vs | raw win rate | length-controlled | model | length | instruction |" in md
    )
    assert "| j | d | verbose | base |" in md and "AlpacaEval 2.0" in md
    across = controlled.controlled(exp_of("all"), {"j": arena()})
    md = "\n".join(controlled.markdown(across))
    assert "| j | d | fancy |" in md and "| judge | dataset | length | headers | lists | bold |" in md
    assert "Chatbot Arena" in md


def test_report_bootstrap_sets_the_resamples_and_zero_keeps_the_point_estimates():
    """report.bootstrap: the intervals come from that many resamples of items (seeded: the same twice);
    0 gives the same point estimates and coefficients without intervals."""
    df = planted("verbose", seed=1, p_longer=0.75)
    full = controlled.controlled(exp_of(), {"j": df}, n_boot=50)["j"]["length_controlled"]["d"]["verbose"]
    again = controlled.controlled(exp_of(), {"j": df}, n_boot=50)["j"]["length_controlled"]["d"]["verbose"]
    bare = controlled.controlled(exp_of(), {"j": df}, n_boot=0)["j"]["length_controlled"]["d"]["verbose"]
    assert full["ci95"] == again["ci95"] and full["ci95"][0] < full["value"] < full["ci95"][1]
    assert bare["ci95"] is None and bare["value"] == full["value"] and bare["coefficients"] == full["coefficients"]
    arena_full = controlled.controlled(exp_of("all"), {"j": arena()}, n_boot=20)["j"]["style_controlled"]["d"]
    arena_bare = controlled.controlled(exp_of("all"), {"j": arena()}, n_boot=0)["j"]["style_controlled"]["d"]
    assert arena_full["coefficients"]["length"]["ci95"] is not None
    assert arena_bare["coefficients"]["length"]["ci95"] is None
    assert arena_bare["strengths"] == {
        p: {**v, **{k: None for k in v if k.endswith("ci95")}} for p, v in arena_full["strengths"].items()
    }


def test_an_outside_baseline_files_answers_meet_each_row_by_turn_and_sample(tmp_path):
    """A pairwise judge against a baseline file (not a generator): the length diagnostics and the
    length control read the answer each judge request met, turn by turn, not the id's last row."""
    from genjudge.stages.validity import with_baseline_answers

    base = tmp_path / "base.parquet"
    pd.DataFrame(
        {
            "id": ["a", "a", "b"],
            "turn": [1, 2, 1],
            "output": ["short one", "a much longer second-turn answer " * 10, "b answer"],
        }
    ).to_parquet(base)
    df = pd.DataFrame(
        {
            "id": ["a", "a", "a", "b"],
            "turn": [1, 2, 1, 1],
            "sample": [0, 0, 1, 0],
            "verdict": ["win", "loss", "tie", "win"],
            "output": ["x", "y", "z", "w"],
        }
    )
    got = with_baseline_answers(df, {"baseline": str(base)})["opponent_output"].tolist()
    # sample 1 meets the baseline's only sample of that turn
    assert got == ["short one", "a much longer second-turn answer " * 10, "short one", "b answer"]


def test_a_generator_that_loses_every_pair_is_fitted_with_the_ridge_and_said_so():
    """Quasi-separation: 'tiny' loses all its pairs. statsmodels does not warn of it, and the plain fit
    gives strengths of +8 and -16 with tight intervals; the ridge keeps them finite and the table says so."""
    df = arena()
    tiny = [
        {**r, "generator": g, "opponent": "tiny", "verdict": "win", "output": "x" * 80, "opponent_output": "y" * 80}
        for r in df.head(40).to_dict("records")
        for g in ("fancy", "solid")
    ]
    games = pd.concat([df, pd.DataFrame(tiny)], ignore_index=True)
    r = controlled.controlled(exp_of("all"), {"j": games}, n_boot=0)["j"]["style_controlled"]["d"]
    assert r["penalised"]
    s = r["strengths"]
    assert min(s, key=lambda p: s[p]["controlled"]) == "tiny"
    assert all(abs(v["raw"]) < 8 and abs(v["controlled"]) < 8 for v in s.values())
    md = "\n".join(controlled.markdown({"j": {"style_controlled": {"d": r}}}))
    assert "(ridge)" in md and "won or lost every one of its pairs" in md
    # Without such a player, no ridge.
    assert not controlled.controlled(exp_of("all"), {"j": df}, n_boot=0)["j"]["style_controlled"]["d"]["penalised"]


def test_style_control_with_one_outcome_throughout_says_it_is_not_estimable():
    df = arena().assign(verdict="tie")
    r = controlled.controlled(exp_of("all"), {"j": df}, n_boot=0)["j"]["style_controlled"]["d"]
    assert r["not_estimable"] == "every judged pair had the same outcome"
    md = "\n".join(controlled.markdown({"j": {"style_controlled": {"d": r}}}))
    assert "| j | d | – | not estimable: every judged pair had the same outcome (450 pairs) |" in md


def test_a_constant_instruction_difficulty_is_no_term_and_leaves_the_fit_as_alone():
    """The other generators lost every item: their difficulty is the same everywhere, the model term
    again; it is left out, so the coefficients are those of the generator alone, not an arbitrary split."""
    alone = planted("verbose", seed=1, p_longer=0.75)
    others = [planted(g, seed=i, p_longer=0.5).assign(verdict="loss") for i, g in enumerate(("weak", "weaker"), 7)]
    lc = controlled.controlled(exp_of(), {"j": pd.concat([alone, *others], ignore_index=True)}, n_boot=0)
    with_others = lc["j"]["length_controlled"]["d"]["verbose"]
    by_itself = controlled.controlled(exp_of(), {"j": alone}, n_boot=0)["j"]["length_controlled"]["d"]["verbose"]
    assert "instruction" not in with_others["coefficients"] and not with_others["penalised"]
    assert with_others["value"] == pytest.approx(by_itself["value"])
    assert with_others["coefficients"] == pytest.approx(by_itself["coefficients"])


def test_style_counts_no_markdown_inside_fenced_code():
    # Arena-Hard-Auto removes fenced code before counting: a `# comment` is no header, `- x` no list item.
    code = "Here:\n```python\n# read it\n- x\n**not bold**\n```\n## Notes\n- one\n**bold**"
    assert style_control.style(code) == {"length": len(code), "headers": 1, "lists": 1, "bold": 1}
    only_code = "```python\n# a comment\n# another\n- x\n```"
    assert style_control.style(only_code) == {"length": len(only_code), "headers": 0, "lists": 0, "bold": 0}
