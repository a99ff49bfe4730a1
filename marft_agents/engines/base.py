"""The seam between the rollout engine and whatever samples tokens: one layer of requests in, one answer out.

A *request* (:class:`~marft_agents.models.sampling.Request`) is one agent's prompt (token ids), the name
of that agent's adapter, and the agent's own :class:`Sampling` where it has one
(``agents.<agent_id>.temperature`` / ``.max_new_tokens`` / ``.top_k`` / ``.top_p`` / ``.stop``). An engine
answers a whole layer of requests (every ready agent of every live env) under the layer's :class:`Sampling` for
the requests without their own, with each response's token ids and the per-token log-probs of the distribution
that sampled it (``softmax(logits / T)`` at the request's ``T``, truncated by its ``top_k`` / ``top_p``; none when
greedy), so the learner's PPO ratio has the right denominator.

Adapter weights live in the policy, which the learner trains. After each update the trainer calls
:meth:`Engine.sync` with the number of updates applied so far; an engine that keeps its own copy of
the weights (vLLM) reloads them then, and every agent-step records the version it was sampled with.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Sequence

from marft_agents.models.sampling import Generation, Request, Sampling


def groups(requests: Sequence[Request], sampling: Sampling) -> dict[tuple[str, Sampling], list[int]]:
    """Indices of ``requests`` by ``(adapter, sampling)`` (a request's own, else ``sampling``): one batched call each.

    Groups come in the order each first appears, and each keeps its requests' order: with one
    sampling for the layer these are the adapter groups the hf engine always made.
    """
    out: dict[tuple[str, Sampling], list[int]] = defaultdict(list)
    for i, r in enumerate(requests):
        out[(r.adapter, r.sampling or sampling)].append(i)
    return dict(out)


class Engine(ABC):
    """Generates layers of requests for a :class:`~marft_agents.models.policy.LaMASPolicy`'s adapters."""

    name: str = ""
    """The engine's name in ``generation.engine``."""

    def __init__(self) -> None:
        self.version = 0
        """Updates applied to the weights this engine samples with (0: the weights it started with)."""
        self.calls = 0
        """Batched generate calls made so far (the hf engine makes one per adapter of a layer)."""

    @abstractmethod
    def generate(self, requests: Sequence[Request], sampling: Sampling) -> Generation:
        """Responses to ``requests``, in their order, with per-token behaviour log-probs under each request's
        sampling (``request.sampling``, else ``sampling``)."""

    def sync(self, version: int) -> None:
        """Serve the policy's current adapter weights from now on, as ``version``."""
        self.version = version

    def close(self) -> None:
        """Free what the engine holds (processes, caches, files); idempotent."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
