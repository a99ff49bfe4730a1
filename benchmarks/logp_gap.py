"""How far the sampler's log-probs of its own tokens are from the learner's, by dtype: the PPO ratio before any step.

    .venv/bin/python benchmarks/logp_gap.py [--batch 32] [--tokens 48] [--temperature 0.3] [--threads 2]

With one epoch and one minibatch per agent, the ratio ``pi_learner(a|o) / pi_sampler(a|o)`` of an action is 1 only if
the two compute the same numbers. The sampler (``LaMASPolicy.generate``: a KV cache, one position per step) and the learner
(``LaMASPolicy.score``: every position of the response at once) run the same model on the same tokens, so in
float32 they agree to rounding; in bfloat16 each rounds its own way, and an action's log-prob sums its tokens'.
This samples ``--batch`` responses of up to ``--tokens`` tokens from SmolLM2-135M-Instruct's untuned adapters (every
run's state before its first update) on MathChain reasoner prompts (``speed.chain_prompts``) at ``--temperature``,
scores them with the learner, and reports per token and per action how far apart the two are, and the fraction of
actions whose ratio falls outside PPO's clip (0.8-1.2), for:

- ``float32``: the base in float32;
- ``bfloat16``: the base in bf16, the LoRA branches in float32 (every ``b_*`` run of ``benchmarks/learning.py``);
- ``bfloat16, output layer float32``: the same with the logits computed in float32 from bf16 hidden states (how
  much of the gap the output layer's rounding is);
- ``bfloat16, the learner twice``: the learner's log-probs against a second scoring of the same batch (what a ratio
  built on recomputed log-probs, ``generation.tis_cap``, starts from).

Results go to ``benchmarks/results/logp_gap.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from pathlib import Path

from marft_agents.algorithms.ppo_settings import PPOSettings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

RESULTS = Path(__file__).parent / "results"
CLIP = PPOSettings().clip_eps  # the learners' default ratio clip
VARIANTS = (
    ("float32", "float32", False, False),
    ("bfloat16", "bfloat16", False, False),
    ("bfloat16, output layer float32", "bfloat16", True, False),
    ("bfloat16, the learner twice", "bfloat16", False, True),
)


def gaps(reference: list, other: list) -> dict:
    """Per-token and per-action gaps between two lists of per-token log-prob tensors (one per response)."""
    token, action = [], []
    for a, b in zip(reference, other):
        d = (b.float() - a.float()).tolist()
        token += [abs(x) for x in d]
        action.append(sum(d))
    return {
        "tokens": len(token),
        "token_abs_mean": statistics.fmean(token),
        "token_abs_max": max(token),
        "action_abs_log_ratio_mean": statistics.fmean(abs(a) for a in action),
        "action_outside_clip": sum(abs(math.exp(a) - 1) > CLIP for a in action) / len(action),
    }


def measure(args, dtype: str, head_float32: bool, twice: bool) -> dict:
    """One variant's gaps (a fresh policy each: the output layer's patch stays with it)."""
    import speed
    import torch
    import torch.nn.functional as F

    from marft_agents import TrainConfig, build_policy
    from marft_agents.models.sampling import Sampling

    policy = build_policy(TrainConfig(model=speed.MODEL, dtype=dtype, lora_compute="float32"), ["reasoner_0", "actor_0"])
    if head_float32:
        head = policy.base.get_output_embeddings()
        weight = head.weight.detach().float()  # (V, d)
        head.forward = lambda hidden: F.linear(hidden.float(), weight)
    prompts = speed.chain_prompts(policy, args.batch)
    torch.manual_seed(1)
    with torch.no_grad():
        generation = policy.generate(prompts, "reasoner_0", Sampling(temperature=args.temperature, max_new_tokens=args.tokens))
        responses, sampled = generation.responses, generation.token_logps
        scored, _, _ = policy.score(prompts, responses, "reasoner_0", args.temperature)  # (B, R)
        learner = [scored[b, : len(r)] for b, r in enumerate(responses)]
        if twice:
            again, _, _ = policy.score(prompts, responses, "reasoner_0", args.temperature)
            return gaps(learner, [again[b, : len(r)] for b, r in enumerate(responses)])
    return gaps(sampled, learner)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--temperature", type=float, default=0.3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    import torch

    from marft_agents.models.dtype import cpu_flags

    torch.set_num_threads(args.threads)
    result = {"batch": args.batch, "tokens": args.tokens, "temperature": args.temperature, "variants": {}}
    result["cpu_flags"] = sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma")))
    for name, dtype, head_float32, twice in VARIANTS:
        result["variants"][name] = row = measure(args, dtype, head_float32, twice)
        print(
            f"{name:34s} per token |d| mean {row['token_abs_mean']:.2e} max {row['token_abs_max']:.2e}; "
            f"per action |log ratio| {row['action_abs_log_ratio_mean']:.3f}, outside the clip {row['action_outside_clip']:.0%}",
            flush=True,
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "logp_gap.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
