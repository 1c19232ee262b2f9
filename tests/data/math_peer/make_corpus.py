"""Writes corpus.jsonl: answer pairs on which `boxed` and `last_number` matching are checked against
Math-Verify's own verdicts (tests/test_math_peer.py). Deterministic: run it again after editing a list
(`python tests/data/math_peer/make_corpus.py`) and commit both files.

Each row: id, kind (`latex`: both answers in `\\boxed{}`, matched with `answer: {reference: boxed,
candidate: boxed}`; `number`: a GSM8K-style reference `#### n` and a reply, matched with `{reference:
gsm8k, candidate: last_number}`), source (`MATH-style`, `GSM8K-style`, `reported`, `variant`), the
reference text and the candidate text. Which of them genjudge and Math-Verify judge differently is
decided by the test, never written here.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).with_name("corpus.jsonl")

# MATH-style final answers: (gold, [equal forms], [different answers]).
LATEX = [
    ("5", ["5.0", "\\dfrac{10}{2}", "5\\text{ cm}"], ["-5", "6", "\\frac{1}{5}"]),
    (
        "\\frac{1}{2}",
        ["0.5", "\\dfrac{1}{2}", "\\tfrac12", "1/2", "\\frac{2}{4}"],
        ["2", "\\frac{1}{3}", "-\\frac{1}{2}"],
    ),
    ("\\frac{3}{4}", ["0.75", "\\dfrac{3}{4}", "75\\%"], ["4", "\\frac{4}{3}", "0.7"]),
    ("-\\frac{7}{3}", ["-\\dfrac{7}{3}", "\\frac{-7}{3}"], ["\\frac{7}{3}", "-\\frac{3}{7}"]),
    ("2\\sqrt{2}", ["\\sqrt{8}", "2 \\sqrt 2", "\\sqrt{2}\\cdot 2"], ["\\sqrt{2}", "4", "2\\sqrt{3}"]),
    ("\\frac{\\sqrt{3}}{2}", ["\\frac{1}{2}\\sqrt{3}", "\\frac{\\sqrt3}{2}"], ["\\frac{\\sqrt{2}}{2}", "\\sqrt{3}"]),
    ("3\\pi", ["\\pi \\cdot 3", "3 \\pi"], ["\\pi", "3", "9.42"]),
    ("\\frac{\\pi}{4}", ["\\frac14\\pi", "0.25\\pi"], ["\\frac{\\pi}{2}", "\\pi"]),
    ("(1,2)", ["(1, 2)", "\\left(1,2\\right)"], ["[1,2]", "(2,1)", "(1,2]"]),
    ("[1,2]", ["[1, 2]", "\\left[1,2\\right]"], ["(1,2)", "[1,2)"]),
    ("(-\\infty, 3]", ["(-\\infty,3]", "\\left(-\\infty, 3\\right]"], ["(-\\infty, 3)", "[3, \\infty)"]),
    (
        "(-\\infty, -1) \\cup (1, \\infty)",
        ["(-\\infty,-1)\\cup(1,\\infty)"],
        ["(-1, 1)", "(-\\infty, 1) \\cup (1, \\infty)"],
    ),
    ("\\{1, 2, 3\\}", ["\\{3, 2, 1\\}", "\\{1,2,3\\}"], ["\\{1, 2\\}", "\\{1, 2, 4\\}"]),
    ("(3, -4)", ["(3,-4)", "\\left( 3, -4 \\right)"], ["(-4, 3)", "(3, 4)"]),
    ("y = 2x + 3", ["y=2x+3", "y = 3 + 2x", "2x+3"], ["y=2x-3", "y = 3x + 2", "y=-2x+3"]),
    ("x^2 + 2x + 1", ["(x+1)^2", "1 + 2x + x^2"], ["x^2 + 1", "(x-1)^2", "x^2+2x-1"]),
    ("a^2+b^2", ["b^2+a^2"], ["a^2-b^2", "(a+b)^2"]),
    ("x^2", ["x \\cdot x", "x^{2}"], ["x_2", "2x", "x^3"]),
    ("90^\\circ", ["90", "90^{\\circ}"], ["180^\\circ", "45"]),
    ("\\text{Evelyn}", ["Evelyn", "\\text{evelyn}", "\\textbf{Evelyn}"], ["\\text{Carla}", "Eve"]),
    ("\\$18.90", ["18.90", "18.9", "\\$18.9"], ["18.09", "\\$19"]),
    ("10\\%", ["10", "10 \\%"], ["20\\%", "1"]),
    (
        "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
        ["\\begin{pmatrix}1\\\\2\\end{pmatrix}"],
        ["\\begin{pmatrix} 2 \\\\ 1 \\end{pmatrix}"],
    ),
    (
        "\\begin{pmatrix} 0 & 3 \\\\ 0 & -1 \\end{pmatrix}",
        ["\\begin{pmatrix}0&3\\\\0&-1\\end{pmatrix}"],
        ["\\begin{pmatrix} 0 & 3 \\\\ 0 & 1 \\end{pmatrix}"],
    ),
    ("1000", ["1,000", "1{,}000", "10^3", "1000.0"], ["100", "10000"]),
    ("14{,}916", ["14916", "14,916"], ["14912", "1491.6"]),
    ("-2", ["-2.0", "- 2"], ["2", "-\\frac{1}{2}"]),
    ("0", ["0.0", "-0"], ["1", "o"]),
    ("\\infty", ["\\infty"], ["-\\infty", "0"]),
    ("e^{2}", ["e^2", "\\exp(2)"], ["2e", "e"]),
    ("\\sqrt{5}-1", ["-1+\\sqrt{5}"], ["1-\\sqrt{5}", "\\sqrt{5}+1"]),
    ("\\frac{1+\\sqrt{5}}{2}", ["\\frac{1}{2}+\\frac{\\sqrt{5}}{2}"], ["\\frac{1-\\sqrt{5}}{2}", "2"]),
    ("2, -3", ["-3, 2", "\\{2, -3\\}"], ["2, 3", "2"]),
    ("x \\in [2, 5)", ["[2,5)", "2 \\le x < 5"], ["(2, 5)", "[2, 5]"]),
    ("k = 4", ["4", "k=4"], ["k=5", "5"]),
    ("\\frac{14}{3}", ["4\\frac{2}{3}", "\\frac{28}{6}", "4.666667"], ["4.6", "\\frac{3}{14}"]),
    ("12", ["12\\text{ inches}", "12.00"], ["1.2", "120"]),
    ("\\text{(C)}", ["\\text{(C)}", "(C)", "C"], ["\\text{(B)}", "B"]),
    ("3^{10}", ["59049"], ["310", "3^{11}"]),
    ("\\dfrac{5}{9}", ["\\frac59", "5/9", "0.5556"], ["0.55", "\\frac{9}{5}"]),
]


def latex_rows() -> list[dict]:
    rows = []
    leads = [
        "So the answer is $\\boxed{{{a}}}$.",
        "Therefore, the final answer is \\boxed{{{a}}}.",
        "Thus we get $\\boxed{{{a}}}$",
    ]
    for i, (gold, same, different) in enumerate(LATEX):
        reference = f"Solving the problem gives $\\boxed{{{gold}}}$."
        for j, cand in enumerate([gold, *same, *different]):
            rows.append(
                {
                    "kind": "latex",
                    "source": "MATH-style",
                    "reference": reference,
                    "candidate": leads[(i + j) % len(leads)].format(a=cand),
                }
            )
    return rows


# GSM8K-style: (gold after ####, [replies]).
GSM8K = [
    (
        "72",
        [
            "She sold 48 + 24 = 72 clips.",
            "The answer is 72.",
            "#### 72",
            "72",
            "So 72.0 clips in all.",
            "She sold 70 clips.",
            "The answer is 71",
            "It is 72 clips, that is 7 more than 65.",
        ],
    ),
    (
        "10",
        [
            "Weng earns $10.",
            "She earned 10.00 dollars.",
            "12/60 * 60 = 10",
            "$9.99",
            "The answer is $\\boxed{10}$.",
            "That is 10%",
        ],
    ),
    (
        "5",
        [
            "Betty needs $5 more.",
            "The answer is 5.",
            "She needs five more dollars.",
            "She needs -5.",
            "100 - 95 = 5",
            "She needs 5 1/2 dollars.",
        ],
    ),
    (
        "1000",
        [
            "The total is 1,000.",
            "The total is 1000.",
            "The total is 1 000.",
            "The total is 1.000,00.",
            "The total is $1,000.00.",
            "The total is 10,00.",
            "The total is 100.",
        ],
    ),
    ("-3", ["The change is -3.", "The change is −3.", "The change is 3.", "The temperature drops to -3 degrees."]),
    ("0.5", ["Half: 1/2.", "It is 0.5.", "It is .5", "It is 0,5", "It is \\frac{1}{2}", "It is 50%", "It is 5."]),
    ("2.25", ["2 1/4 cups", "2.25 cups", "9/4 cups", "2¼ cups", "2.3 cups"]),
    ("1250000", ["1,250,000 people", "1.25 million people", "1 250 000 people", "1.25e6 people", "12,50,000 rupees"]),
    ("18", ["$18 per day", "18 dollars", "She makes 16 + 2 = 18", "9 * 2 = 18.", "She makes 18.5"]),
    (
        "3",
        [
            "The answer is \\frac{6}{2}",
            "It takes 3 hours",
            "It takes three hours",
            "It is 3/1",
            "3 hours or 180 minutes",
        ],
    ),
    ("694", ["694 - 1 = 693", "The result is 694!", "694.", "6 9 4"]),
    ("20", ["20%", "20 percent", "0.2", "The answer is 20."]),
    ("60", ["60 minutes", "1 hour, i.e. 60 minutes", "x^2 = 60", "60 = 2^2 \\cdot 15"]),
]


def gsm8k_rows() -> list[dict]:
    rows = []
    for gold, replies in GSM8K:
        reference = f"Work out the steps.\n#### {gold}"
        rows += [{"kind": "number", "source": "GSM8K-style", "reference": reference, "candidate": r} for r in replies]
    return rows


def reported_rows() -> list[dict]:
    """The answers a review found misread: formulas that matched as text, numbers read as fragments."""
    pairs = [
        ("y=2x+3", "y=2x-3"),
        ("(1,2)", "[1,2]"),
        ("(-\\infty, 3)", "(-\\infty, 3]"),
        ("a^2+b^2", "a^2-b^2"),
        ("x^2", "x_2"),
    ]
    rows = []
    for a, b in pairs:
        rows.append(
            {"kind": "latex", "source": "reported", "reference": f"\\boxed{{{b}}}", "candidate": f"\\boxed{{{a}}}"}
        )
        rows.append(
            {"kind": "latex", "source": "reported", "reference": f"\\boxed{{{a}}}", "candidate": f"\\boxed{{{b}}}"}
        )
    for reply, gold in [
        ("$\\frac{1}{2}$", "2"),
        ("$\\frac{1}{2}$", "0.5"),
        ("\\dfrac{3}{4}", "4"),
        ("\\dfrac{3}{4}", "0.75"),
        ("3.0×10⁸", "10"),
        ("3.0×10⁸", "300000000"),
        ("1'000", "1000"),
        ("1'000", "0"),
        ("2½", "2"),
        ("2½", "2.5"),
    ]:
        rows.append({"kind": "number", "source": "reported", "reference": f"#### {gold}", "candidate": reply})
    return rows


# Where the answer sits in a reply: (reference, reply), both read by `boxed`.
STRUCTURES = [
    ("\\boxed{4}", "First I got \\boxed{3}, but correcting the sign: \\boxed{4}."),
    ("\\boxed{4}", "\\boxed{4}. Final Answer: The final answer is $3$. I hope it is correct."),
    ("\\boxed{4}", "\\boxed{3}. Final Answer: The final answer is $4$. I hope it is correct."),
    ("\\boxed{4}", "So the answer is \\fbox{4}."),
    ("\\boxed{\\frac{1}{2}}", "So the answer is \\boxed{\\frac{1}{2}"),
    ("\\boxed{2, 3}", "The roots are $\\boxed{2}$ and $\\boxed{3}$."),
    ("\\boxed{3}", "The roots are $\\boxed{2}$ and $\\boxed{3}$."),
    ("\\boxed{\\{1, 2\\}}", "The set is $\\boxed{\\{1,2\\}}$."),
    ("\\boxed{x^2}", "We get \\[\\boxed{x^{2}}\\]"),
    ("\\boxed{10}", "$\\boxed{10}$ \\text{ is the answer}"),
]


def variant_rows(rng: random.Random) -> list[dict]:
    """Generated: numbers in the shapes replies write them, equal or off by a little; answers placed
    in a reply in different ways."""
    rows = [{"kind": "latex", "source": "variant", "reference": r, "candidate": c} for r, c in STRUCTURES]
    for _ in range(60):
        n = rng.choice([rng.randint(0, 99), rng.randint(100, 9999), rng.randint(10_000, 9_999_999)])
        shape = rng.choice(["{n}", "{n:,}", "${n:,}", "{n}.0", "{n:,}.00"])
        wrong = rng.random() < 0.4
        value = n + rng.choice([-10, -1, 1, 10]) if wrong else n
        reply = rng.choice(["The answer is {v}.", "So she has {v} left.", "{v}", "In total: {v} apples"])
        rows.append(
            {
                "kind": "number",
                "source": "variant",
                "reference": f"so\n#### {n}",
                "candidate": reply.format(v=shape.format(n=value)),
            }
        )
    for _ in range(40):
        a, b = rng.randint(1, 20), rng.randint(2, 12)
        value = a / b
        shape = rng.choice(["\\frac{{{a}}}{{{b}}}", "\\dfrac{{{a}}}{{{b}}}", "{a}/{b}", "{d:.6f}", "{d:.2f}"])
        cand = shape.format(a=a, b=b, d=value)
        gold = rng.choice(["\\frac{{{a}}}{{{b}}}", "{a}/{b}"]).format(a=a, b=b)
        rows.append(
            {"kind": "latex", "source": "variant", "reference": f"\\boxed{{{gold}}}", "candidate": f"\\boxed{{{cand}}}"}
        )
    return rows


# Forms Math-Verify misreads (docs/reference-checks.md): LaTeX's separators between groups of digits
# and per cent signs. Each (answer, [references it equals], [references it does not]), both boxed.
TEX_SEPARATORS = ["\\,", "\\!", "\\:", "\\;", "\\ ", "{,}", ",\\!"]
PER_CENTS = ["50\\%", "50%", "50 \\%", "50\\,\\%", "50 percent"]


def form_rows() -> list[dict]:
    triples = []
    for sep in TEX_SEPARATORS:
        triples += [
            (f"2{sep}500", ["2500", "2,500"], ["502", "25"]),
            (f"12{sep}000", ["12000"], ["0", "12"]),
            (f"(1{sep}000, 2)", ["(1000, 2)"], ["(0, 2)", "(1, 0, 2)"]),
        ]
    for sep in ["\\,", "\\!", "\\ "]:
        triples.append((f"12{sep}50", [f"12{sep}50"], ["62", "1250", "50"]))
    for form in PER_CENTS:
        triples.append((form, ["50", "50\\%"], ["0.5", "\\frac{1}{2}"]))
    triples += [
        ("0.5", [], ["50\\%"]),  # a reference 50\% is 50: the answer 0.5 does not match it
        ("1.414214", ["\\sqrt{2}"], ["\\sqrt{3}"]),  # a match within 6 decimal places (never decides by rule)
        ("0.75\\pi", ["\\frac{3\\pi}{4}"], ["\\frac{\\pi}{4}"]),
    ]
    rows = []
    for answer, same, different in triples:
        for reference in [*same, *different]:
            rows.append(
                {
                    "kind": "latex",
                    "source": "forms",
                    "reference": f"So $\\boxed{{{reference}}}$.",
                    "candidate": f"The answer is $\\boxed{{{answer}}}$.",
                }
            )
    replies = [f"So the total is $10{sep}000$ dollars." for sep in TEX_SEPARATORS]
    replies += ["It is 10,\\!000 in all.", "So $12\\,50$ dollars.", "It rose by $50\\%$.", "It rose by 50\\%."]
    for reply in replies:
        for gold in ["10000", "0", "50", "1250"]:
            rows.append({"kind": "number", "source": "forms", "reference": f"Steps.\n#### {gold}", "candidate": reply})
    return rows


def main() -> None:
    rows = latex_rows() + gsm8k_rows() + reported_rows() + variant_rows(random.Random(20261127)) + form_rows()
    with OUT.open("w", encoding="utf-8") as f:
        for i, row in enumerate(rows):
            f.write(json.dumps({"id": f"p{i:03d}", **row}, ensure_ascii=False) + "\n")
    print(f"{len(rows)} pairs -> {OUT}")


if __name__ == "__main__":
    main()
