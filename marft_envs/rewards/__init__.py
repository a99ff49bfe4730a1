"""Reward functions: plain, pure, importable; the envs compose them (never hard-wired into ``step``).

- ``math.py``: the MATH grader (``extract_answer``, ``answers_match``, ``grade``); ``_latex*``,
  ``_math_*``: its parts.
- ``math_attempt.py``: the MATH envs' reward for one attempt (MathChain's, MathSolo's, MathDebate's,
  MathCORY's): ``grade_attempt``, called by ``marft_envs/tasks/math/base.py`` (``MathTask.end_round``).
- ``format.py``: the gold-free ``\\boxed{}`` format bonus (the MATH envs' ``format_reward``).
- ``booking.py``: the booking reward (database, outputs, assertions; per-agent credit), over the
  domain's days, hours and distances in ``booking_units.py``.
- ``code.py``: the code-repair rewards (tests passed, located lines, tester and reviewer scores).
- ``credit.py``: who receives a round's reward (``team``, ``last``, ``per_agent``).
"""
