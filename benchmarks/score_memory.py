"""Peak memory of scoring and generating over a large vocabulary: the chunked paths against the unchunked ones.

    .venv/bin/python benchmarks/score_memory.py [--batch 64] [--response 96] [--prompt 32] [--vocab 50000]
        [--hidden 64] [--layers 2] [--threads 1]

The model is a randomly initialised Llama with a large vocabulary and a tiny body (``--hidden`` wide,
``--layers`` deep), so the vocabulary-wide tensors are what the peak is made of; the embedded model's
tokenizer gives the pad and end-of-turn ids. Four stages, each in a fresh subprocess:

- ``score``: one ``LaMASPolicy.score`` of ``--batch`` responses of ``--response`` tokens after
  ``--prompt``-token prompts, with LoRA on, and the backward of a loss over every token: the forward and
  backward of one PPO minibatch. ``unchunked`` is the code ``score`` ran before the chunking (the output
  layer and softmax over all ``B * R`` positions at once, ``(B, R, V)`` tensors kept for backward);
  ``chunked`` is ``score`` today (:mod:`marft_agents.models.token_scores`).
- ``generate``: one ``lm.generate`` of ``--batch`` rows of ``--response`` tokens (end-of-turn banned so
  every row runs to the end) at T 0.7. ``unchunked`` keeps every step's logits (``output_logits``)
  and stacks them; ``chunked`` records the drawn tokens' log-probs step by step (``lm.ChosenLogps``).

Each child reports its resident set before the stage and its peak (``ru_maxrss``) after; the increment is
what the stage cost. Results go to ``benchmarks/results/score_memory.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

RESULTS = Path(__file__).parent / "results"
STAGES = [("score", "unchunked"), ("score", "chunked"), ("generate", "unchunked"), ("generate", "chunked")]


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def unchunked_score(policy, prompts, responses, adapter, temperature):
    """``LaMASPolicy.score`` before the chunking: ``(B, R, V)`` logits, log-softmax and exponential at once."""
    import torch

    from marft_agents.models import lm

    P, ids, attn, mask = lm.score_layout(prompts, responses, policy.pad_token_id)
    S, R = ids.shape[1], mask.shape[1]
    with policy.active(adapter) as model:
        logits = lm.forward_after_prefix(model, prompts[0][:P], ids, attn, logits_to_keep=R + 1).logits  # (B, R + 1, V)
    logits = logits[:, :R].float() / temperature  # (B, R, V)
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, ids[:, S - R :].unsqueeze(-1)).squeeze(-1)  # (B, R)
    entropy = -(logp_all.exp() * logp_all).sum(-1)  # (B, R)
    return logp, entropy, mask


def unchunked_generate(model, prompts, temperature, max_new_tokens, pad, eos, logits_processor):
    """``lm.generate`` before the chunking: every step's raw logits kept, stacked, log-softmaxed at once."""
    import torch

    from marft_agents.models import lm

    ids, mask = lm.left_pad(prompts, pad)
    config = lm.sampling_config(max_new_tokens, temperature, pad, eos, output_logits=True)
    out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config, logits_processor=logits_processor)
    new = out.sequences[:, ids.shape[1] :]  # (B, L)
    logits = torch.stack(out.logits, dim=1).float() / temperature  # (B, L, V)
    return torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)  # (B, L)


def child(stage: str, path: str, args) -> dict:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, LogitsProcessorList, NoBadWordsLogitsProcessor

    from marft_agents import LaMASPolicy, load_base
    from marft_agents.models import lm

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    _, tokenizer = load_base("embedded")
    config = LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=4 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=args.prompt + args.response + 8,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    policy = LaMASPolicy(LlamaForCausalLM(config), tokenizer, ["agent_0"])
    shared = torch.randint(10, args.vocab, (args.prompt // 2,)).tolist()  # a role prompt every row shares
    prompts = [shared + torch.randint(10, args.vocab, (args.prompt - len(shared),)).tolist() for _ in range(args.batch)]
    responses = [torch.randint(10, args.vocab, (args.response,)).tolist() for _ in range(args.batch)]
    before = _rss_mb()
    if stage == "score":
        score = LaMASPolicy.score if path == "chunked" else unchunked_score
        logp, entropy, mask = score(policy, prompts, responses, "agent_0", 0.7)
        ((logp + 0.01 * entropy) * mask).sum().backward()
    else:
        ban_eos = LogitsProcessorList([NoBadWordsLogitsProcessor([[tokenizer.eos_token_id]], eos_token_id=None)])
        with torch.no_grad(), policy.active("agent_0") as model:
            if path == "chunked":
                lm.generate(model, prompts, temperature=0.7, max_new_tokens=args.response, pad_token_id=tokenizer.pad_token_id,
                            eos_token_id=tokenizer.eos_token_id, logits_processor=ban_eos)  # fmt: skip
            else:
                unchunked_generate(model, prompts, 0.7, args.response, tokenizer.pad_token_id, tokenizer.eos_token_id, ban_eos)
    return {"rss_before_mb": round(before, 1), "peak_mb": round(_peak_mb(), 1), "increment_mb": round(_peak_mb() - before, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--response", type=int, default=96)
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--child", nargs=2, metavar=("STAGE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, args)))
        return

    from roofline import cpu

    passed = list(sys.argv[1:])
    results = {"cpu": cpu(), "setting": {k: v for k, v in vars(args).items() if k != "child"}, "stages": {}}
    print(f"CPU: {results['cpu']['model']} ({results['cpu']['cores']} cores; {', '.join(results['cpu']['flags'])})")
    print(f"setting: {results['setting']}  (one (B, R, V) float32 tensor: {args.batch * args.response * args.vocab * 4 / 2**20:.0f} MB)")
    for stage, path in STAGES:
        out = subprocess.run([sys.executable, __file__, *passed, "--child", stage, path], capture_output=True, text=True, check=True)
        results["stages"][f"{stage}/{path}"] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{'stage':<10} {'unchunked: increment / peak MB':>32} {'chunked: increment / peak MB':>30}")
    for stage in ("score", "generate"):
        old, new = results["stages"][f"{stage}/unchunked"], results["stages"][f"{stage}/chunked"]
        print(f"{stage:<10} {old['increment_mb']:>18.0f} / {old['peak_mb']:<11.0f} {new['increment_mb']:>16.0f} / {new['peak_mb']:<11.0f}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "score_memory.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
