"""The per-episode sampler's cost (``distributed.episode_seeds``) against the hf engine's own sampling.

    .venv/bin/python benchmarks/episode_sampler.py [--model smollm2-135m-instruct] [--batch 16]
        [--max-new-tokens 32] [--repeats 3] [--threads 2]

``EpisodeSeededEngine`` (``marft_agents/engines/seeded.py``) draws each row's next token with that
row's episode generator (``lm.draw`` with ``generators``); the plain ``HFEngine`` draws every row's
number from torch's global generator at once. Both generate from the same ``--batch`` ``marft/MathChain-v0`` reasoner
prompts (the trainer's LoRA on every linear layer, T 0.7), in interleaved repeats. Reported: each
call's wall seconds per generated step (``max_new_tokens`` steps, or fewer when every row ended), and
the sampler's own time alone on ``(batch, vocab)`` random logits — the overhead, as a share of a
plain step. Results go to ``benchmarks/results/episode_sampler.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from roofline import ENV, KWARGS, cpu  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "episode_sampler.json")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)

    import marft_envs
    from marft_agents import Sampling, TrainConfig, build_policy
    from marft_agents.engines import make_engine
    from marft_agents.engines.seeded import EpisodeSeededEngine
    from marft_agents.models import lm
    from marft_agents.models.sampling import Request

    env = marft_envs.make(ENV, **KWARGS)
    policy = build_policy(TrainConfig(model=args.model, env=ENV, env_kwargs=KWARGS, threads=args.threads), env.possible_agents)
    requests = []
    for i in range(args.batch):
        env.reset(seed=1_000 + i)
        requests.append(Request(policy.prompt(env.observe("reasoner_0")), policy.adapter_of["reasoner_0"], episode=i))
    sampling = Sampling(temperature=0.7, max_new_tokens=args.max_new_tokens)
    plain, seeded = make_engine("hf", policy), EpisodeSeededEngine(policy)

    def timed(engine) -> float:
        if engine is seeded:
            seeded.seed_episodes({i: 7 + i for i in range(args.batch)})
        torch.manual_seed(0)
        t = time.perf_counter()
        gen = engine.generate(requests, sampling)
        steps = max(len(r) for r in gen.responses)
        return (time.perf_counter() - t) / steps

    timed(plain)  # warm-up
    runs = {"plain": [], "seeded": []}
    for r in range(args.repeats):
        for name in ("plain", "seeded") if r % 2 == 0 else ("seeded", "plain"):
            runs[name].append(timed(plain if name == "plain" else seeded))

    vocab = policy.base.get_output_embeddings().weight.shape[0]
    generators = [torch.Generator().manual_seed(i) for i in range(args.batch)]
    scores = torch.randn(args.batch, vocab)
    lm.draw(scores, 0.7, generators=generators)
    t = time.perf_counter()
    for _ in range(20):
        lm.draw(scores, 0.7, generators=generators)
    alone = (time.perf_counter() - t) / 20

    step = statistics.median(runs["plain"])
    result = {
        "cpu": cpu(),
        "threads": args.threads,
        "model": args.model,
        "batch": args.batch,
        "vocab": vocab,
        "s_per_step": runs,
        "seeded_over_plain": statistics.median(runs["seeded"]) / step,
        "sampler_alone_s": alone,  # the whole draw: log-softmax, cumulative sum, one number per row
        "sampler_share_of_plain_step": alone / step,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "cpu"}, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
