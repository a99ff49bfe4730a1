r"""A gold-free format reward: does a response end in a final answer the grader can read from a box?

    boxed_format(text)          1.0 if `text` holds a complete, non-empty `\boxed{...}` (or `\fbox{...}`), else 0.0

The MATH envs add `format_reward * boxed_format(action)` to each answering agent's reward when their
`format_reward` option is above 0 (off by default). It needs no gold answer, so it gives a signal
while the model still solves nothing: a group in which some responses box an answer and others do
not has rewards that differ. It is a warm start, not an objective: it pays for the form, never for
the content, so a run that keeps it for long learns to box anything. Weight it well below the
correctness reward (the recipe in `docs/real-models.md` uses 0.1 against 1 for a right answer) and
drop it once the team is rewarded for right answers (a later run with `init_from=` the first).

Pure: deterministic, never raises, linear in the length of the text (the grader's own box scan).
"""

from __future__ import annotations

from marft_envs.rewards._math_extract import _BOX, _last_boxed

MAX_ANSWER_CHARS = 100
"""A box holding more than this many characters is a boxed essay, not a final answer: no reward."""


def boxed_format(text: str, max_chars: int = MAX_ANSWER_CHARS) -> float:
    r"""1.0 if the last complete `\boxed{...}` of `text` holds 1 to `max_chars` characters (spaces trimmed), else 0.0.

    Only a box counts (not GSM8K's `####` or "the answer is"), since the envs' role prompts ask for one;
    an unfinished box (`\boxed{\frac{1}{2}`) counts as none, as in the grader.
    """
    if not isinstance(text, str) or not _BOX.search(text):
        return 0.0
    answer = _last_boxed(text)
    return 1.0 if answer is not None and 0 < len(answer) <= max_chars else 0.0
