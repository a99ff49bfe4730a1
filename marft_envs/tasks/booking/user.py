"""The scripted user: answers the team's ``ask_user`` questions from fixed rules — deterministic, no model.

It knows its own request (the task) and answers by keywords, first rule that matches:

- about the left-out detail of a ``clarify`` task: the length ("how long", "duration", "minutes",
  ...) or who is meant (the ambiguous first name, "which", "who", "full name", ...);
- about the budget, the place or the day: it restates its request;
- anything else: "Everything I know is in my request."

The same question always gets the same answer, so episodes stay reproducible from the seed.
"""

from __future__ import annotations

import re

from marft_envs.tasks.booking.generator import DURATION_TEXT, Task
from marft_envs.tasks.booking.world import DAY_NAMES

_LENGTH = re.compile(r"how long|duration|length|minutes?|hours?|\blong\b", re.I)
_WHO = re.compile(r"\b(which|who|whom|full name|surname|last name)\b", re.I)
_BUDGET = re.compile(r"budget|price|cost|how much|\$", re.I)
_PLACE = re.compile(r"where|distance|far|km|near|location", re.I)
_DAY = re.compile(r"\b(when|day|date)\b", re.I)
DONT_KNOW = "Everything I know is in my request."


class ScriptedUser:
    """Answers questions about one task by keyword rules."""

    def __init__(self, task: Task):
        self.task = task

    def answer(self, question: str) -> str:
        t, c = self.task, self.task.clarification
        if c is not None and c.topic == "duration" and _LENGTH.search(question):
            return c.answer
        if c is not None and c.topic == "person" and (c.mention.casefold() in question.casefold() or _WHO.search(question)):
            return c.answer
        if _BUDGET.search(question):
            return f"At most ${t.budget} in total."
        if _PLACE.search(question):
            return f"Within {t.max_km:g} km of the {t.near}."
        if _DAY.search(question):
            return f"Next {DAY_NAMES[t.day]}."
        if _LENGTH.search(question) and c is None:
            return f"It should take {DURATION_TEXT[t.duration]}."
        return DONT_KNOW
