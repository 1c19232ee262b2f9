"""Every extraction method reads a degenerate 1 MB answer (a generator stuck in a loop until
`max_new_tokens`) in work linear in its length: counted, not timed.

What is counted: every call to a compiled regular expression of the extraction modules (and a regex
method's own pattern), and the characters each call was given to read: a search's window (from `pos` to
`endpos`), an anchored match's matched length, and the whole of any string that is not the answer itself
(a slice made to pass it: a copy that long). A method that scans the text before each number, or
copies it after each marker, counts a quadratic number of characters; a linear one a few per character.
"""

import re
import sys

import pytest

from genjudge.judging import choice, extracted, extraction, numberforms, textnorm
from genjudge.judging.extraction import check_answer, extract

MODULES = (extraction, extracted, choice, numberforms, textnorm)
MB = 1 << 20
# Characters read, and regex calls, per character of the answer, at most. Python's regex engine reads
# these patterns at a few hundred MB a second and makes about a million calls a second: 16 MB and 1
# million calls are well under a second's work for a 1 MB answer.
PER_CHAR = 16
CALLS_PER_CHAR = 1

# One loop of each shape a stuck generator repeats, and what each method must still find at the end.
LOOPS = {  # each once quadratic in a method, or a shape a method reads
    "worked steps": "So 16 - 3 - 4 = 9 eggs, and 9 * 2 = $18, not $16. ",
    "markers": "#### 18\n",
    "boxes never closed": "\\boxed{18 ",
    "boxes": "so \\boxed{18}, ",
    "heads of expressions": "\\sqrt[3 \\frac{1",
    "letters in one clause": "A B C D E ",
    "separators": "10{,}000 and 10,\\!000 and 2\\,500 ",
}


class Count:
    def __init__(self, text: str):
        self.text, self.calls, self.chars = text, 0, 0

    def read(self, string, n: int) -> None:
        self.calls += 1
        self.chars += n + (len(string) if string is not self.text else 0)


class Counted:
    """A compiled pattern that counts what it is given to read (see the module's docstring)."""

    def __init__(self, rx: re.Pattern, count: Count):
        self.rx, self.count = rx, count

    def __getattr__(self, name):
        return getattr(self.rx, name)

    def _window(self, string, pos=0, endpos=sys.maxsize):
        self.count.read(string, max(0, min(endpos, len(string)) - pos))
        return pos, endpos

    def search(self, string, pos=0, endpos=sys.maxsize):
        return self.rx.search(string, *self._window(string, pos, endpos))

    def finditer(self, string, pos=0, endpos=sys.maxsize):
        return self.rx.finditer(string, *self._window(string, pos, endpos))

    def findall(self, string, pos=0, endpos=sys.maxsize):
        return self.rx.findall(string, *self._window(string, pos, endpos))

    def sub(self, repl, string, count=0):
        self._window(string)
        return self.rx.sub(repl, string, count)

    def _anchored(self, how, string, pos=0, endpos=sys.maxsize):
        m = getattr(self.rx, how)(string, pos, endpos)
        self.count.read(string, (m.end() - pos) if m else 0)
        return m

    def match(self, string, pos=0, endpos=sys.maxsize):
        return self._anchored("match", string, pos, endpos)

    def fullmatch(self, string, pos=0, endpos=sys.maxsize):
        return self._anchored("fullmatch", string, pos, endpos)


@pytest.fixture
def counted(monkeypatch):
    """count(text) -> Count: from then on every pattern of the extraction modules counts for `text`."""
    count = Count("")
    wrapped: dict[int, Counted] = {}

    def wrap(rx):
        return wrapped.setdefault(id(rx), Counted(rx, count))

    for module in MODULES:
        for name, value in list(vars(module).items()):
            if isinstance(value, re.Pattern):
                monkeypatch.setattr(module, name, wrap(value))
            elif isinstance(value, list) and value and all(isinstance(v, re.Pattern) for v in value):
                monkeypatch.setattr(module, name, [wrap(v) for v in value])
    compile_pattern = extraction._compile
    monkeypatch.setattr(extraction, "_compile", lambda pattern: wrap(compile_pattern(pattern)))

    def start(text: str) -> Count:
        count.text, count.calls, count.chars = text, 0, 0
        return count

    return start


def degenerate(loop: str, size: int) -> str:
    """Whole loops of `loop`, about `size` characters."""
    return loop * (size // len(loop))


def assert_linear(counted, text: str, method) -> None:
    count = counted(text)
    extract(text, method)
    assert count.chars <= PER_CHAR * len(text), (method, count.chars / len(text))
    assert count.calls <= CALLS_PER_CHAR * len(text), (method, count.calls / len(text))


@pytest.mark.parametrize("loop", LOOPS.values(), ids=LOOPS.keys())
def test_every_method_reads_every_degenerate_shape_in_linear_work(counted, loop):
    # A quarter of a megabyte: a quadratic method counts hundreds of times the bound already.
    text = degenerate(loop, MB // 4)
    for method in WORST:
        assert_linear(counted, text, method)


# Each method on the shape that was quadratic in it (or, for the linear ones, the costliest).
WORST = {
    "gsm8k": "markers",
    "last_number": "worked steps",
    "boxed": "boxes",
    "choice": "letters in one clause",
    r"answer is (\d+)": "worked steps",
    None: "separators",
}


@pytest.mark.parametrize("method", WORST, ids=[str(m) for m in WORST])
def test_each_method_reads_a_1_mb_degenerate_answer_in_under_a_seconds_work(counted, method):
    assert_linear(counted, degenerate(LOOPS[WORST[method]], MB), method)


def test_the_count_sees_a_quadratic_scan(counted):
    # The counter itself: a search before each number from the start of the text, as last_number once
    # did, counts far beyond the bound.
    text = degenerate(LOOPS["worked steps"], 16 * 1024)
    count = counted(text)
    for t in list(extraction.TOKEN.finditer(text)):
        extraction._EXPRESSION_BEFORE.search(text, 0, t.start())
    assert count.chars > 10 * PER_CHAR * len(text)


def test_the_parse_stage_reads_a_degenerate_answer_in_linear_work(counted):
    # check_answer is what the judge's cascade and the parse stage call for every answer.
    text = degenerate(LOOPS["worked steps"], MB)
    count = counted(text)
    check = check_answer(text, "Natalia sold 18.\n#### 18", {"reference": "gsm8k", "candidate": "last_number"})
    assert check.candidate == "18" and check.how == "last number in the text"
    assert count.chars <= PER_CHAR * len(text) and count.calls <= CALLS_PER_CHAR * len(text)
    count = counted(text)
    assert check_answer(text, "18").match is False  # no extraction: the whole texts, normalised
    assert count.chars <= PER_CHAR * len(text) and count.calls <= CALLS_PER_CHAR * len(text)


def test_what_the_methods_find_at_the_end_of_a_degenerate_answer():
    size = MB // 4
    stated = "The answer is 18. Wait, let me check: the answer is 18. "
    assert extract(degenerate(stated, size), "last_number").value == "18"
    assert extract(degenerate(LOOPS["markers"], size), "gsm8k").strict is True  # every marker says 18
    assert extract(degenerate(LOOPS["markers"], size) + "#### 19", "gsm8k").strict is False
    boxed = extract(degenerate(LOOPS["boxes"], size), "boxed")
    assert boxed.value == "18" and boxed.strict is True
    assert extract(degenerate(LOOPS["boxes"], size) + "\\boxed{\\boxed{18}}", "boxed").strict is False  # nested
    assert extract(degenerate(LOOPS["boxes never closed"], size), "boxed").value is None
    assert extract(degenerate(LOOPS["letters in one clause"], size), "choice").reason.startswith("ambiguous")
    assert extract(degenerate("It can't be C, so B or D and ", size) + "The answer is B.", "choice").value == "B"
