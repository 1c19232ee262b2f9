"""`choice`: one letter A-E out of a reply, never a guess."""

from __future__ import annotations

import re

from genjudge.judging.extracted import (
    LAST_LINE,
    MARKED,
    MENTIONED,
    RETRACTED,
    STATED,
    WHOLE_TEXT,
    Extracted,
    Rejections,
    found_as,
    not_found,
    retracted_after,
)

# The whole reply, or its last line, is one letter: `B`, `(c)`, `D.`, ` E) `, `**B**`.
_CHOICE_ALONE = re.compile(r"(?:\*\*)?\(?\s*([A-Ea-e])\s*\)?(?:\*\*)?[.:)]?")
# "answer is (B)", "Answer: B", "the answer is option B", "answer: **B**"; not "option B" alone,
# which a reply may mention while rejecting it. A lower-case letter only where it cannot be a
# word: bracketed ("answer is (b)"), in bold, or ending the line ("Answer: c", "answer is e.");
# "the answer is a bit ..." is the article.
_CHOICE_STATED = re.compile(
    r"(?i:\banswer)(?i:\s+is)?\s*[:=]?\s*(?i:(?:option|choice)\s+)?"
    r"(?:[(\[*]*\s*([A-E])\b(?![\w'])"
    r"|[(\[]\s*([a-e])\s*[)\]]|\*\*\s*([a-e])\s*\*\*|([a-e])(?=[.)]?[ \t]*(?:\n|$)))"
)
# \boxed{B}, \boxed{(b)}, \boxed{\text{B}}: stated as the answer too.
_CHOICE_BOXED = re.compile(
    r"\\(?:boxed|fbox)\s*\{\s*(?:\\(?:text|textbf|mathrm)\s*\{\s*)?\(?\s*([A-Ea-e])\s*\)?\s*\}?\s*\}"
)
# A stated letter that goes on into a list of letters: "answer is A and C", "Answer: (A) or (B)", "A, C".
_CHOICE_LISTED = re.compile(
    r"[ \t]*[)\]*]*[ \t]*(?:,[ \t]*(?:(?:and|or)\b)?|/|&|\b(?:and|or|nor)\b)[ \t]*(?i:(?:option|choice)\s+)?"
    r"(?:[(\[*]*[ \t]*([A-E])(?![\w'’])|[(\[][ \t]*([a-e])[ \t]*[)\]])"
    # ... and ends the statement there: "The answer is B, C is wrong" states B alone
    r"(?=[ \t]*[)\]*]*[ \t]*(?:$|[\n.,;:!?]|/|&|\b(?:and|or|nor)\b))"
)
# A letter marked as a choice: `(B)`, `B.`/`B)`/`B:` starting a line, `**B**`.
_CHOICE_MARKED = [
    re.compile(r"\(([A-E])\)"),
    re.compile(r"(?m)^[ \t>*-]*([A-E])[.):](?!\w)"),
    re.compile(r"\*\*\s*([A-E])\s*\*\*"),
]
# A capital letter A-E standing alone (not in a word, an abbreviation like U.S.A. or B.C., or `\A`).
_CHOICE_MENTIONED = re.compile(r"(?<![\w'’\\])(?<![A-Za-z]\.)([A-E])(?![\w'’])(?!\.[A-Za-z])")
# A capital letter A-E ending the reply: "... is B", "... is B." or "... is (B)".
_CHOICE_ENDING = re.compile(r"(?<![\w'’\\])\(?([A-E])\)?[.!]?[*\s]*$")
# "A" before a word is the article ("A good choice is (B)"), unless the word is one of these
# ("A or B", "A is wrong") or a single letter ("A B").
_ARTICLE_A = re.compile(
    r"A[ \t]+(?!(?:and|or|nor|not|is|was|are|were|seems|looks|also|too|only|vs|versus|but|because"
    r"|since|than|then|instead|would|could|should|might|may|must|can|will)\b)[A-Za-z]{2}"
)


def _letter(m: re.Match) -> tuple[str, int, int]:
    i = next(i for i, g in enumerate(m.groups(), 1) if g)
    return m.group(i).upper(), m.start(i), m.end(i)


def _mentioned(text: str, rejections: Rejections, start: int = 0) -> list[tuple[str, bool]]:
    """Each capital letter A-E standing alone from `start` on (not the article "A"), and whether it is rejected."""
    return [
        (m.group(1), rejections.negated(m.start(1), m.end(1)))
        for m in _CHOICE_MENTIONED.finditer(text, start)
        if m.group(1) != "A" or not _ARTICLE_A.match(text, m.start())
    ]


def _one_letter(seen: list[tuple[str, bool]], how: str) -> Extracted | None:
    """The one letter of `seen` (several: ambiguous; only rejected ones: none), or None if there is none."""
    letters = sorted({letter for letter, _ in seen})
    if len(letters) > 1:
        return not_found(f"ambiguous: several choices ({', '.join(letters)}) and no 'answer is X'")
    if not letters:
        return None
    if all(rejected for _, rejected in seen):
        return not_found(f"the reply rejects {letters[0]} and chooses no letter")
    return found_as(letters[0], how, False)


def choice(text: str) -> Extracted:
    """One letter A-E, never a guess: the whole reply; else the last stated answer ("answer is B",
    "Answer: B", \\boxed{B}) that the reply does not reject ("I don't think the answer is A"), unless it
    names several ("answer is A and C": ambiguous), or a letter after a retraction ("The answer is A.
    Wait, no, it is C." reads C); else a last line that is the letter alone; else the one marked letter
    (`(B)`, `B)` starting a line, `**B**`; several: ambiguous); else the one capital letter the reply
    mentions standing alone (not the article "A") where it ends the reply; several mentioned:
    ambiguous. A letter the reply rejects ("It can't be C.", "not B", "I would not pick D") is never
    read. Only the whole reply and a stated answer with nothing taken back and no other letter named
    but rejected ones are strict."""
    stripped = text.strip()
    alone = _CHOICE_ALONE.fullmatch(stripped)
    if alone:
        return found_as(alone.group(1).upper(), WHOLE_TEXT, True)
    rejections = Rejections(text)
    # (match, in a box): a boxed letter goes on into no list of letters.
    candidates = [(m, False) for m in _CHOICE_STATED.finditer(text)] + [(m, True) for m in _CHOICE_BOXED.finditer(text)]
    stated = [
        (m, boxed)
        for m, boxed in sorted(candidates, key=lambda c: c[0].start())
        if not rejections.negated(*_letter(m)[1:])
    ]
    if stated:
        last, boxed = stated[-1]
        letter = _letter(last)[0]
        listed = None if boxed else _CHOICE_LISTED.match(text, last.end())
        if listed:
            other = next(g for g in listed.groups() if g).upper()
            if other != letter:
                return not_found(f"ambiguous: the stated answer names several choices ({letter}, {other})")
        retraction = retracted_after(text, last.end())
        if retraction:
            later = _one_letter(_mentioned(text, rejections, retraction.end()), RETRACTED)
            if later is not None and (not later.ok or later.value != letter):
                return later
            return found_as(letter, STATED, False)  # nothing else chosen after it, but not certain
        # Certain only where every other letter the reply names is rejected: "The answer is B, or
        # possibly C" and "Answer A claims ...; the correct choice is C" hedge or choose another.
        others = any(other != letter and not rejected for other, rejected in _mentioned(text, rejections))
        return found_as(letter, STATED, len({_letter(m)[0] for m, _ in stated}) == 1 and not others)
    last_line = _CHOICE_ALONE.fullmatch(stripped.rsplit("\n", 1)[-1].strip())
    if last_line:
        return found_as(last_line.group(1).upper(), LAST_LINE, False)
    # A reply that marks one letter ("(B) Paris, since vitamin C ...") chose it; one marking several did not.
    marked = [
        (m.group(1), rejections.negated(m.start(1), m.end(1))) for rx in _CHOICE_MARKED for m in rx.finditer(text)
    ]
    one = _one_letter(marked, MARKED)
    if one is not None:
        return one
    mentioned = _mentioned(text, rejections)
    one = _one_letter(mentioned, MENTIONED)
    if one is not None and not one.ok:
        return one
    # A letter only mentioned is read where it ends the reply ("The best option is B"); one in passing
    # ("Vitamin C deficiency causes scurvy.") is no choice.
    ending = _CHOICE_ENDING.search(text)
    if one is not None and ending and ending.group(1) == one.value:
        return one
    return not_found("no choice letter A-E")
