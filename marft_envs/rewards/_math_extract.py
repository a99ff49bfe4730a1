"""Finding the final answer in a model response: the extraction rules of `rewards.math`, in order.

    final_answer(text)   the answer by the first rule that finds one (see `rewards.math`), or None

The scans are written to stay linear in the length of the text on hostile input (see the comments
at `_SENTENCE_END` and in `_last_number`): a reward reads whatever a model writes.
"""

from __future__ import annotations

import re


def final_answer(text: str) -> str | None:
    """The final answer inside `text`, by the extraction rules in `rewards.math`'s docstring; None if none."""
    if _BOX.search(text):  # a model that boxes its answer is judged by its box alone
        return _last_boxed(text)
    for rule in (_last_hashes, _answer_phrase, _bare_answer, _last_number):
        answer = rule(text)
        if answer is not None:
            return answer
    return None


_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_UNBRACED_BOX = re.compile(r"[ \t]*([^\s${}]+)")
_BRACE = re.compile(r"[{}]")
_HASHES = re.compile(r"####[ \t]*([^\n]*)")
_ANSWER_IS = re.compile(r"answer(?:\s+is|\s*:)[\s:]*([^\n]*)", re.I)
_MATH_SPAN = re.compile(r"\$+([^$]+)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]")
# A full stop, or the next word. A run of spaces is tried only from its first space (the lookbehind),
# so the search stays linear: `\s+` retried from every space of a long run is quadratic.
_SENTENCE_END = re.compile(r"\.(?:\s|$)|(?<!\s)\s+(?=[A-Za-z]{2})")
_COMMAND = re.compile(r"\\[A-Za-z]+")
# A number is the first of these that matches, scanning left to right (as one alternation would):
_NUMBER_START = re.compile(r"\\[dt]?frac\{|-?\.?\d")  # where any of them can begin
_FRAC_NUMBER = re.compile(r"\\[dt]?frac\{-?\d+\}\{-?\d+\}")
_GROUPED_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,])")  # 1,234.5
_DIGIT_GROUPS = re.compile(r"-?\d{1,3}(?:,\d{3})+")
_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?|-?\.\d+")


def _last_boxed(text: str) -> str | None:
    starts = [m.end() for m in _BOX.finditer(text)]
    if not starts:
        return None
    closers = _brace_pairs(text, starts[0])
    for start in reversed(starts):  # the last box that is complete
        i = start
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text) and text[i] == "{":
            if i in closers:
                return text[i + 1 : closers[i]].strip()
        elif m := _UNBRACED_BOX.match(text, start):
            return m.group(1)
    return None


def _brace_pairs(text: str, start: int) -> dict[int, int]:
    """{index of `{`: index of its `}`} from `start` on, in one pass (linear on hostile input)."""
    pairs, stack = {}, []
    for m in _BRACE.finditer(text, start):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    return pairs


def _last_hashes(text: str) -> str | None:
    if "####" not in text:
        return None
    found = [m.group(1).strip() for m in _HASHES.finditer(text)]
    return next((f for f in reversed(found) if f), None)


def _answer_phrase(text: str) -> str | None:
    for m in reversed(list(_ANSWER_IS.finditer(text))):
        tail = m.group(1).strip().strip("*").strip()
        if span := _MATH_SPAN.match(tail):
            tail = next(g for g in span.groups() if g is not None)
        else:
            tail = _until_sentence_end(tail)
        if tail.strip():
            return tail.strip()
    return None


def _until_sentence_end(tail: str) -> str:
    # Cut at the first full stop or following word that lies outside every brace group, so that
    # `5\text{ units}` stays whole while `5 apples.` gives `5`.
    depth, counted = 0, 0
    for m in _SENTENCE_END.finditer(tail):
        depth += tail.count("{", counted, m.start()) - tail.count("}", counted, m.start())  # one pass in all
        counted = m.start()
        if depth <= 0:
            return tail[: m.start()]
    return tail


def _bare_answer(text: str) -> str | None:
    s = text.strip()
    if not s or len(s) > 100 or "\n" in s or re.search(r"[A-Za-z]{2,}", _COMMAND.sub("", s)):
        return None
    return s


def _last_number(text: str) -> str | None:
    # Read backwards, one piece at a time: the last piece that holds a number holds the last one.
    # No number contains whitespace, so the left-to-right scan of a piece that starts and ends at
    # whitespace (or the text's ends) finds the same numbers as the scan of the whole text; the work
    # is then one piece's scan plus a C-speed search of the pieces after it, not a Python step per
    # number of a 1 MB `0.0.0.…`. A stretch without whitespace longer than a piece is cut.
    end = len(text)
    while end > 0:
        start = max(0, end - _PIECE)
        if start and (space := _WHITESPACE.search(text, start, end)):
            start = space.start()
        if found := _last_number_in(text, start, end):
            return found
        end = start
    return None


_PIECE = 8192  # characters read at a time by `_last_number`
_WHITESPACE = re.compile(r"\s")


def _last_number_in(text: str, pos: int, end: int) -> str | None:
    """The last number of text[pos:end] by one left-to-right scan (see `_NUMBER_START`), or None."""
    # One alternation regex retried the grouped form at every group of `1,234,567,...,12` (which
    # fails only at its end): quadratic. When the grouped form fails, it fails from every later group
    # of the same run too (same end, same next character), so it is not tried again inside the run.
    last, dead_until = None, -1
    while start := _NUMBER_START.search(text, pos, end):
        p = start.start()
        found = _FRAC_NUMBER.match(text, p, end)
        if found is None and p >= dead_until:
            found = _GROUPED_NUMBER.match(text, p, end)
            if found is None and (groups := _DIGIT_GROUPS.match(text, p, end)):
                dead_until = groups.end()
        found = found or _PLAIN_NUMBER.match(text, p, end)
        if found is None:
            pos = p + 1
            continue
        last, pos = found, found.end()
    return last.group() if last else None
