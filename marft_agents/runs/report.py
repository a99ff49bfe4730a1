"""What a run reports: honest labels for its evaluations, the before/after table, and transcripts.

The labels say what was measured, from what the evaluation itself recorded (``heldout``,
``protocol``, ``attempts``, ``success_reported``; see ``evaluation.py``): "held-out accuracy" only
for an env that declares a held-out split, "attempts with feedback" only for one that declares an
attempts option, and mean return as the headline when the env never reports success.

Transcripts (``samples/eval_before.jsonl``, ``samples/eval_after.jsonl``) hold a few whole
evaluation episodes: every agent's observation and action, rewards and the outcome; ``marft show
RUN`` prints them, and the ones written while training too (``runs/transcripts.py``: ``--which train``).
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from marft_agents.runs import files as run_files
from marft_agents.runs import transcripts

SAMPLES = "samples"
"""The run folder's subfolder of transcripts."""
OUTCOMES = "outcomes"
"""The run folder's subfolder of per-problem evaluation outcomes (``<evaluation>.jsonl`` each, beside ``samples/``)."""


def headline(result: dict) -> tuple[str, str]:
    """``(key, label)`` of an evaluation's headline number: its accuracy, or its mean return."""
    n = result.get("episodes", 0)
    where = (
        "held-out"
        if result.get("heldout", True)
        else f"{n} episodes of the env as configured, seeds disjoint from training"
    )
    drawn = result.get("decoding", "greedy")  # eval.temperature > 0: "sampled at T=..."
    if not result.get("success_reported", True):
        return "mean_return", f"mean return ({drawn}; {where}; the env reports no success)"
    if result.get("headline_metric") == "mean_return":  # partial credit: the env says which number to read
        return "mean_return", f"mean return ({drawn}; {where}; partial credit)"
    if result.get("protocol", "single_pass") == "attempts_with_feedback":
        return "accuracy", f"solved within {result['attempts']} attempts with feedback ({drawn}; {where})"
    single = ", single pass" if result.get("protocol", "single_pass") == "single_pass" else ""
    if result.get("heldout", True):
        return "accuracy", f"held-out accuracy ({drawn}{single})"
    return "accuracy", f"accuracy ({drawn}{single}) on {where}"


HEALTH = {
    "advantage_mean": ("{adapter}/advantage_mean",),
    "advantage_std": ("{adapter}/advantage_std",),
    "reward": ("{adapter}/reward",),
    "rewarded_frac": ("signal/{agent}/rewarded_frac",),
    "own_accuracy": ("train/{agent}/own_accuracy",),
    "copy_rate": ("train/{agent}/copy_rate",),
    "truncated_frac": ("signal/{agent}/truncated_frac",),
    "explained_variance": ("{adapter}/critic/explained_variance", "critic/explained_variance"),
}
"""Per-agent health in the summary: its name -> the metrics it is read from, the first one logged (an adapter's, an
agent's own, or the run's: a critic the agents share)."""


def agent_health(metrics: dict, adapter_of: dict[str, str]) -> dict[str, dict[str, float]]:
    """Each agent's health in one update's ``metrics``: its adapter's mean and spread of advantages and mean
    reward (shared by the agents of a ``"shared"`` adapter), its share of positive rewards, own accuracy, copy rate
    and share of responses cut at its token limit where logged, and its critic's explained variance (its own
    critic's, CORY; else the critic every agent shares, the same on every row)."""
    out = {}
    for agent, adapter in adapter_of.items():
        found = {}
        for name, keys in HEALTH.items():
            key = next((k for k in (k.format(agent=agent, adapter=adapter) for k in keys) if k in metrics), None)
            if key is not None:
                found[name] = metrics[key]
        if found:
            out[agent] = found
    return out


HEALTH_COLUMNS = {
    "reward": "{:.3f}",
    "rewarded_frac": "{:.1%}",
    "own_accuracy": "{:.1%}",
    "copy_rate": "{:.1%}",
    "truncated_frac": "{:.1%}",
    "explained_variance": "{:+.2f}",
}
"""The table's columns after the advantage's, by health name: their formats (``health_table`` names them)."""
HEALTH_HEADINGS = ("reward", "rewarded", "own accuracy", "copy rate", "cut at limit", "critic EV")


def health_table(agents: dict[str, dict[str, float]], updates: int) -> list[str]:
    """The summary table's per-agent block, the last update's: mean advantage (± its spread), reward, share of
    positively rewarded steps, own accuracy, copy rate, share of responses cut at the token limit, and the critic's
    explained variance of the returns (before that update's fit)."""
    if not agents:
        return []
    width = max(len(f"agent (update {updates})"), *(len(a) for a in agents))
    columns = ("advantage ± spread", *HEALTH_HEADINGS)
    lines = [f"{f'agent (update {updates})':{width}}   " + "   ".join(columns)]
    for agent, h in agents.items():
        mean, std = h.get("advantage_mean"), h.get("advantage_std")
        cells = (
            f"{mean:+.3f} ± {std:.3f}" if mean is not None and std is not None else "-",
            *(f.format(h[k]) if k in h else "-" for k, f in HEALTH_COLUMNS.items()),
        )
        lines.append(f"{agent:{width}}   " + "   ".join(f"{c:>{len(n)}}" for c, n in zip(cells, columns)))
    return lines


def summary_table(summary: dict) -> str:
    """A small before/after table for the terminal; mean return is always in it."""
    before, after = summary["eval_before"], summary["eval_after"]
    pct, num = "{:6.1%}", "{:6.2f}"
    key, label = headline(before)
    rows = [(label, before[key], after[key], pct if key == "accuracy" else num)]
    for k in before:
        if k.startswith("solved_within"):
            rows.append((k.replace("_", " ") + " (held-out)", before[k], after.get(k, float("nan")), pct))
    if key != "mean_return":
        rows.append(
            ("mean return", before.get("mean_return", float("nan")), after.get("mean_return", float("nan")), num)
        )
    for agent, r in before["roles"].items():
        later = after["roles"].get(agent, {})
        if "own_accuracy" in r:
            rows.append((f"{agent} own accuracy", r["own_accuracy"], later.get("own_accuracy", float("nan")), pct))
        for k in ("answer_accuracy_when_right", "answer_accuracy_when_wrong"):
            if r.get(k) is not None:  # right/wrong: the agent's own first-round own_correct, > 0 or 0
                side = "right (own_correct > 0)" if k.endswith("right") else "wrong (own_correct = 0)"
                row_label = f"answer accuracy when {agent} is {side}"
                rows.append((row_label, r[k], float("nan") if later.get(k) is None else later[k], pct))
        if "copy_rate" in r:  # where the env reports answers (MathChain's actor: the reasoner's answer repeated)
            rows.append((f"{agent} copy rate", r["copy_rate"], later.get("copy_rate", float("nan")), pct))
        if "mean_response_tokens" in r:  # absent from evaluations written before it was added
            rows.append(
                (
                    f"{agent} response length (tokens)",
                    r["mean_response_tokens"],
                    later.get("mean_response_tokens", float("nan")),
                    "{:6.1f}",
                )
            )
    if "agreement" in before:  # where the env reports answers: every answer of the last round the same
        rows.append(
            ("agreement (all answers the same)", before["agreement"], after.get("agreement", float("nan")), pct)
        )
    width = max(len(r[0]) for r in rows)
    lines = [
        f"{'':{width}}   before    after",
        *(f"{n:{width}}   {f.format(b)}   {f.format(a)}" for n, b, a, f in rows),
    ]
    spread = (
        f"±{before['accuracy_stderr']:.1%} standard error per accuracy"
        if key == "accuracy"
        else f"±{before.get('mean_return_stderr', 0.0):.2f} standard error of the mean return"
    )
    signal = summary.get("signal") or {}
    if "rewarded_frac" in signal:  # absent from summaries written before it was added
        lines.append(
            f"training signal: {signal['rewarded_frac']:.1%} of episodes rewarded, "
            f"{signal['zero_spread_frac']:.1%} of groups with equal rewards, "
            f"{signal['updates_without_signal']} of {signal['updates']} updates without signal"
        )
    lines += health_table(
        summary.get("agents") or {}, summary["updates"]
    )  # absent from summaries written before it was added
    if summary.get("frozen_agents"):
        lines.append(
            f"frozen (agents.<agent_id>.train=false, acted but never updated): {', '.join(summary['frozen_agents'])}"
        )
    minutes = summary["wall_time_s"] / 60
    lines.append(f"{spread} on {before['episodes']} episodes; {summary['updates']} updates in {minutes:.1f} min")
    return "\n".join(lines)


def zero_reward_warning(
    updates_seen: int, model: str = "embedded", options: list[str] | None = None, look_at: str | None = None
) -> str:
    """The warning for a run whose every reward so far was exactly 0; ``options``: the ways to get a signal to name;
    ``look_at``: the agent to look at first, where one stands out (``signal.diagnostics.agent_to_look_at``)."""
    unable = (
        "the embedded model knows only arithmetic prompts; try a real model such as model=smollm2-135m-instruct"
        if model == "embedded"
        else f"{model} may solve too few of these problems"
    )
    recipe = 'docs/real-models.md, "When the reward is zero"'
    todo = f" Ways to get a signal, in the order to try: {'; '.join(options)} ({recipe})." if options else ""
    first = f" {look_at[0].upper()}{look_at[1:]}. Other likely causes:" if look_at else " Likely causes:"
    return (
        f"warning: every reward of the first {updates_seen} updates was exactly 0, so there is nothing to "
        f"learn from.{first} the model cannot do the task at all ({unable}), max_new_tokens is too "
        "short to finish an answer, or the env never rewards success (check its reward on a hand-written "
        "right answer). Transcripts of the evaluation episodes (and, with log.transcripts_every, samples of the "
        "training episodes, each prompt as the model read it) are in the run's samples/ folder "
        f"(marft show RUN --list).{todo}"
    )


# -- transcripts ------------------------------------------------------------------------------------


def write_samples(run_dir: Path, name: str, transcripts: list[dict]) -> Path:
    """Write transcripts (see :func:`transcript`) to ``run_dir/samples/<name>.jsonl`` (see ``run_files``)."""
    text = "".join(json.dumps(t) + "\n" for t in transcripts)
    return run_files.write_text(run_dir, Path(SAMPLES, f"{name}.jsonl"), text)


def write_outcomes(run_dir: Path, name: str, outcomes: list[dict]) -> Path:
    """Write an evaluation's per-problem outcomes (``evaluation.problem_outcomes``) to
    ``run_dir/outcomes/<name>.jsonl``, whole and atomically (``run_files``)."""
    text = "".join(json.dumps(o) + "\n" for o in outcomes)
    return run_files.write_text(run_dir, Path(OUTCOMES, f"{name}.jsonl"), text)


def check_transcripts_path(path: Path, *, overwrite: bool = False, flag: str = "--transcripts") -> None:
    """Refuse (one line, naming ``flag``) a ``--transcripts`` (or ``--outcomes``) path no evaluation should be played
    for: checked before it is.

    It must name a ``.jsonl`` file that is not a symbolic link, in a folder that can be written (or
    created), and that does not exist yet unless ``overwrite`` (a run's ``metrics.jsonl`` is a ``.jsonl`` too).
    """
    if path.suffix != ".jsonl":
        raise ValueError(f"{flag} {path}: name a .jsonl file")
    too_long = [part for part in path.parts if len(os.fsencode(part)) > NAME_MAX]
    if too_long:
        raise ValueError(f"{flag} {path}: the name {too_long[0][:40]}… is longer than {NAME_MAX} bytes")
    run_files.refuse_link(path)
    if path.exists():
        if path.is_dir():
            raise ValueError(f"{flag} {path} is a folder: name a .jsonl file")
        if not overwrite:
            raise ValueError(f"{flag} {path} exists: name a new file, or pass --overwrite to replace it")
    existing = next(
        p for p in [path.parent, *path.parent.parents] if os.path.lexists(p)
    )  # the folder the rest is made in
    if not existing.is_dir():
        raise ValueError(f"{flag} {path}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path}: the folder {existing} cannot be written")
    probe = existing / f".marft-probe.{secrets.token_hex(4)}.tmp"  # root passes os.access: try what the write does
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        os.unlink(probe)
    except OSError as err:
        raise ValueError(f"{flag} {path}: the folder {existing} cannot be written ({err.strerror})") from None


NAME_MAX = 240
"""The longest file or folder name ``--transcripts`` takes, in bytes: 255 (most file systems) less the temporary
file's ``.<name>.<8 hex>.tmp``."""


def write_transcripts(path: Path, transcripts: list[dict], *, overwrite: bool = False) -> Path:
    """Transcripts to a ``.jsonl`` file of the user's choosing (``marft eval --transcripts``), atomically."""
    check_transcripts_path(path, overwrite=overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    return run_files.write_text(path.parent, path.name, "".join(json.dumps(t) + "\n" for t in transcripts))


def write_outcomes_file(path: Path, outcomes: list[dict], *, overwrite: bool = False) -> Path:
    """Per-problem outcomes to a ``.jsonl`` file of the user's choosing (``marft eval --outcomes``), atomically."""
    check_transcripts_path(path, overwrite=overwrite, flag="--outcomes")
    path.parent.mkdir(parents=True, exist_ok=True)
    return run_files.write_text(path.parent, path.name, "".join(json.dumps(o) + "\n" for o in outcomes))


REWARD_FILTERS = {
    "any": lambda t: True,
    "rewarded": lambda t: t["return"] != 0,
    "unrewarded": lambda t: t["return"] == 0,
}
"""``marft show --reward``: which transcripts to print."""


def read_transcripts(path: Path, n: int | None, keep) -> list[dict]:
    """The first ``n`` transcripts of a ``.jsonl`` file that ``keep`` accepts, read no further than needed.

    A line that is not a transcript is a ValueError naming the file, the line and the field.
    """
    found: list[dict] = []
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if n is not None and len(found) >= n:
                break
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                t = json.loads(line)
            except (ValueError, RecursionError) as err:
                raise ValueError(f"{where}: not a JSON transcript ({str(err)[:120]}){NOT_TRANSCRIPTS}") from None
            check_transcript(t, where)
            if keep(t):
                found.append(t)
    return found


NOT_TRANSCRIPTS = "; transcripts are what `marft eval --transcripts` and a run's samples/ hold"


def check_transcript(t, where: str) -> None:
    """Raise ValueError naming ``where`` and the field unless ``t`` has every field :func:`show` prints, of its type."""

    def bad(field: str, problem: str):
        raise ValueError(f"{where}: field {field!r} {problem}{NOT_TRANSCRIPTS}")

    if not isinstance(t, dict):
        raise ValueError(f"{where}: a {type(t).__name__}, not a JSON object{NOT_TRANSCRIPTS}")
    if "episode" not in t:
        bad("episode", "is missing")
    if not _number(t.get("return")):
        bad("return", f"must be a number, got {str(t.get('return'))[:40]!r}")
    if "solved" not in t or t["solved"] not in (True, False, None) or type(t["solved"]) not in (bool, type(None)):
        bad("solved", "must be true, false or null")
    if not isinstance(t.get("steps"), list):
        bad("steps", "must be a list")
    for i, step in enumerate(t["steps"]):
        _check_step(step, f"steps[{i}]", bad)
    agents = t.get("agents", {})  # a training transcript's (runs/transcripts.py)
    if not isinstance(agents, dict) or not all(isinstance(h, dict) for h in agents.values()):
        bad("agents", "must be an object of objects")


def _check_step(step, field: str, bad) -> None:
    """``bad(field, problem)`` unless the agent-step ``step`` has every field :func:`show` prints, of its type."""
    if not isinstance(step, dict):
        bad(field, "must be an object")
    for key in ("round", "agent", "action"):
        if key not in step:
            bad(f"{field}.{key}", "is missing")
    for key in ("reward", "return_to_go"):  # return_to_go: a training transcript's, where there
        if (key == "reward" or key in step) and not _number(step.get(key)):
            bad(f"{field}.{key}", f"must be a number, got {str(step.get(key))[:40]!r}")
    if not isinstance(step.get("reward_components"), dict):
        bad(f"{field}.reward_components", "must be an object")
    if step.get("observation") is not None and not isinstance(step["observation"], dict):
        bad(f"{field}.observation", "must be an object or null")
    for key in ("prompt", "response"):  # a training transcript's
        if key in step and not isinstance(step[key], str):
            bad(f"{field}.{key}", "must be a string")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def show(
    run_dir: str | Path, which: str = "eval_after", n: int | None = None, reward: str = "any", update: int | None = None
) -> str:
    """Transcripts as readable text: a run folder's or a ``.jsonl`` file's.

    In a run folder, ``which`` (with ``update``) names the file (``transcripts.resolve``): eval_before, eval_after,
    ``train`` (a sample of an update's training episodes: each step's prompt and response as the model read and
    wrote them), ``eval`` (a mid-run evaluation's), or a whole name such as ``train_update_000025``.
    """
    if reward not in REWARD_FILTERS:
        raise ValueError(f"reward must be one of {list(REWARD_FILTERS)}, got {reward!r}")
    given = Path(run_dir)
    if given.suffix == ".jsonl":
        if update is not None:
            raise ValueError("--update picks a file in a run folder's samples/, not in a .jsonl file")
        path = given
    else:
        which = transcripts.resolve(given / SAMPLES, which, update)
        path = given / SAMPLES / f"{which}.jsonl"
    if not path.is_file():
        known = transcripts.names(path.parent)
        raise FileNotFoundError(
            f"no transcripts at {path}"
            + (f"; there are: {', '.join(known)}" if known else "; runs write them at each evaluation")
        )
    if n is not None and n < 1:
        raise ValueError(f"-n must be at least 1, got {n}")
    return "\n".join(
        line for t in read_transcripts(path, n, REWARD_FILTERS[reward]) for line in _episode_text(t, which)
    )


def _episode_text(t: dict, which: str) -> list[str]:
    """One transcript's lines: its outcome, then each step's reward and text (a training step's exact prompt and
    response, else what the env showed and the action it received); a training sample's learner figures first."""
    solved = {True: "yes", False: "no", None: "not reported"}[t["solved"]]
    out = [f"=== {which}, episode {t['episode']}: solved {solved}, return {t['return']:.2f}"]
    for agent, health in t.get("agents", {}).items():  # this update's, from the learner's metrics
        figures = ", ".join(f"{k}={v:.3g}" for k, v in health.items() if isinstance(v, (int, float)))
        out.append(f"learner, {agent}: {figures}")
    for s in t["steps"]:
        parts = ", ".join(f"{k}={v:g}" for k, v in s["reward_components"].items() if isinstance(v, (int, float)))
        to_go = f", return to go {s['return_to_go']:g}" if "return_to_go" in s else ""
        out.append(
            f"--- round {s['round']}, {s['agent']} (reward {s['reward']:g}{to_go}{'; ' + parts if parts else ''})"
        )
        if "prompt" in s or "response" in s:
            out += [f"[prompt]\n{s.get('prompt', '')}", f"[response]\n{s.get('response', '')}"]
            continue
        for field, text in (s["observation"] or {}).items():
            if text:
                out.append(f"[{field}]\n{text}")
        out.append(f"[action]\n{s['action']}")
    return out


def list_samples(run_dir: str | Path) -> str:
    """The transcripts a run folder holds, one name a line (what ``marft show RUN --which NAME`` reads)."""
    folder = Path(run_dir) / SAMPLES
    found = transcripts.names(folder)
    if not found:
        raise FileNotFoundError(f"no transcripts in {folder}: a run writes them at each evaluation")
    return "\n".join(found)
