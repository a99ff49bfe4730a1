"""LaTeX clean-up for the MATH grader (`rewards.math`): answer strings in, answer strings out.

    normalise(s)        the canonical spelling: no control characters, `$`, boxes, sizing or spacing
    clean_answer(s)     a normalised answer without what never changes its value (units, degree marks,
                        `\\text` wrappers, connectives, a leading `x \\in`)
    is_word / word_key  text answers (`\\text{Evelyn}`, `(C)`) and their case-folded comparable form
    split_top / closing_index / nesting_depth / balanced   bracket-aware helpers for the reader

Everything here is pure; the caller (`rewards._math_read`) caps the length of an answer.
"""

from __future__ import annotations

import re

_UNICODE = str.maketrans(
    {
        "\u2212": "-",
        "\u2013": "-",
        "\u03c0": r"\pi ",
        "\u221e": r"\infty ",
        "\u221a": r"\sqrt",
        "\u00d7": "*",
        "\u00b7": "*",
        "\u00f7": "/",
        "\u2264": r"\le ",
        "\u2265": r"\ge ",
        "\u2260": r"\ne ",
        "\u00b1": r"\pm ",
        "\u00b0": r"^\circ",
        "\u00a0": " ",
        "\n": " ",
        "\t": " ",
    }
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_WHOLE_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{(.*)\}", re.S)
# LaTeX-only thousands separators: `10,\!080`, `10{,}080` and `10\,000` are always one number.
_LATEX_THOUSANDS = re.compile(r"(\d)(?:,\\!\s*|\{,\}|\\,(?=\d{3}(?!\d)))(?=\d)")
_SUBSTITUTIONS = [
    (re.compile(r"\\(?:left|right)\s*\."), ""),  # invisible delimiters
    (re.compile(r"(?<!\\)\\(?:left|right|[bB]igg?[lr]?|displaystyle|textstyle|quad|qquad)(?![a-zA-Z])"), ""),
    (re.compile(r"(?<!\\)\\[!,;: ]|~"), " "),  # spacing commands
    (re.compile(r"\\[dtc]frac(?![a-zA-Z])"), r"\\frac"),
    (re.compile(r"\\[dt]binom(?![a-zA-Z])"), r"\\binom"),
    (re.compile(r"\\(?:mbox|textrm|textbf|textit|textup|textnormal|mathrm|mathbf|mathit|mathsf|operatorname)\s*(?=\{)"), r"\\text"),
    (re.compile(r"\^\s*(?:\{\s*\\circ\s*\}|\\circ)|\\circ|\\degree"), ""),  # degrees are dropped
    (re.compile(r"\\%|\s*\\text\s*\{\s*percent\s*\}"), "%"),  # kept for the caller: 50\% is 50 or 0.5
    (re.compile(r"\\(?:cdot|times|ast)(?![a-zA-Z])"), "*"),
    (re.compile(r"\\div(?![a-zA-Z])"), "/"),
    (re.compile(r"\\(?:leq?|leqslant)(?![a-zA-Z])|<="), r"\\le "),
    (re.compile(r"\\(?:geq?|geqslant)(?![a-zA-Z])|>="), r"\\ge "),
    (re.compile(r"\\neq?(?![a-zA-Z])|!="), r"\\ne "),
    (re.compile(r"\\lt(?![a-zA-Z])"), "<"),
    (re.compile(r"\\gt(?![a-zA-Z])"), ">"),
    (re.compile(r"\\lbrace(?![a-zA-Z])"), r"\\{"),
    (re.compile(r"\\rbrace(?![a-zA-Z])"), r"\\}"),
    (re.compile(r"\\(?:emptyset|varnothing)(?![a-zA-Z])"), r"\\{\\}"),
    (re.compile(r"\\dots|\\ldots|\\cdots"), ""),
]
_SPACES = re.compile(r"\s+")


def normalise(s: str) -> str:
    """Canonical spelling of an answer: no control characters, `$`, boxes, sizing or spacing."""
    s = _CONTROL.sub("", s).translate(_UNICODE).strip()
    s = s.replace("\\$", "").replace("$", "").strip()
    while (m := _WHOLE_BOX.fullmatch(s)) and balanced(m.group(1)):
        s = m.group(1).strip()
    s = _LATEX_THOUSANDS.sub(r"\1", s)
    for pattern, repl in _SUBSTITUTIONS:
        s = pattern.sub(repl, s)
    return _SPACES.sub(" ", s).strip().rstrip(".").strip()


def balanced(s: str) -> bool:
    """True when every `{` in s is closed and no `}` closes nothing."""
    depth = 0
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


_WORD = re.compile(r"(?:\\text\s*\{[^{}\d]*[A-Za-z][^{}\d]*\}\s*)+|\(\s*[A-Za-z]\s*\)")


def is_word(s: str) -> bool:
    """A text answer (`\\text{Evelyn}`, `\\text{(C)}`, `(C)`): compared as a case-folded word."""
    return _WORD.fullmatch(s) is not None


def word_key(s: str) -> str:
    """The comparable form of a text answer: no `\\text`, brackets, spaces or dots; case-folded."""
    return re.sub(r"\\text|[{}()\[\]\s\\.]", "", s).casefold()


_UNIT_WORDS = (
    "cm|mm|km|m|meters?|metres?|inch|inches|in|ft|feet|foot|yards?|yd|miles?|mi|units?|square units"
    "|sq units|degrees?|deg|cents?|dollars?|hours?|hrs?|minutes?|mins?|seconds?|secs?|days?|weeks?"
    "|years?|grams?|kg|pounds?|lbs?|mph|radians?|rad"
)
_TRAILING_TEXT = re.compile(r"(?<=\S)\s*\\text\s*\{[^{}\d]*\}\s*(?:\^\s*\{?\d\}?)?$")
_TRAILING_UNIT = re.compile(rf"(?<=[\d}}])\s+(?:{_UNIT_WORDS})(?:\s*\^\s*\{{?\d\}}?)?$")
_CONNECTIVES = re.compile(r"\\text\s*\{\s*(?:and|or)\s*\}|\s(?:and|or)\s")
_TEXT_WRAPPER = re.compile(r"\\text\s*\{([^{}]*)\}")
_IN_SET = re.compile(r"^[A-Za-z]\s*\\in(?![a-zA-Z])\s*")


def clean_answer(s: str) -> str:
    """Drop units, connectives, `\\text` wrappers and a leading `x \\in` from a normalised answer."""
    s = _CONNECTIVES.sub(",", s)
    while True:  # `5 \text{ cm}^2`, `10 \text{ inches}`, `7 mph`: units never change the value
        stripped = _TRAILING_UNIT.sub("", _TRAILING_TEXT.sub("", s)).rstrip(". ")
        if stripped == s:
            break
        s = stripped
    s = _TEXT_WRAPPER.sub(r"\1", s)
    return _IN_SET.sub("", s).strip().rstrip(".,;").strip()


def nesting_depth(s: str) -> int:
    """Deepest bracket nesting of s, counting `(`, `[` and `{` alike."""
    depth = deepest = 0
    for ch in s:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    return deepest


def split_top(s: str, sep: str) -> list[str]:
    """Split s at each `sep` that is outside every bracket."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        ch = s[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and s.startswith(sep, i):
            parts.append(s[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def closing_index(s: str, i: int) -> int:
    """Index of the bracket that closes the one at s[i] (any of `([{` / `)]}`), or -1."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] in "([{":
            depth += 1
        elif s[j] in ")]}":
            depth -= 1
            if depth == 0:
                return j
    return -1
