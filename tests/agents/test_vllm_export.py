"""vLLM serves what ``marft export`` writes: an agent's adapter folder on its base, and its merged model folder.

Run with ``make test-vllm`` (its own venv); skipped where vLLM is not installed. A short run of the
embedded model, its adapters moved off their small first steps, is exported both ways; vLLM samples
a few responses from each, and marft's own policy scores them: the sampled tokens' log-probs agree
within 1e-4 (both float32), and the untuned base's are far off, so vLLM served the trained agent.
"""

import gc
import importlib.util

import pytest

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vLLM is not installed in this Python: `make test-vllm` builds .venv-vllm and runs these tests",
    ),
]

TOLERANCE = 1e-4
"""vLLM's log-probs of its sampled tokens vs marft's recompute, both float32 (as tests/agents/test_vllm_engine.py)."""
FAR = 1e-2
"""The least gap to the untuned base's log-probs: the adapter shows in them."""
AGENT = "reasoner_0"
TEMPERATURE = 2.0
"""Sampling temperature: at 1 the embedded model samples tokens it is sure of with or without the adapter (log-probs
near 0 either way); at 2 the adapter shows in them. (Scoring a fixed response through vLLM's prompt log-probs would be
sharper, but vLLM 0.32's CPU build fails on prompt log-probs under a LoRA adapter.)"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A one-update MathChain run of the embedded model, perturbed, with ``AGENT`` exported as an adapter and merged;
    returns ``(folder, policy)``: the exports' folder and marft's policy of the run."""
    from test_export import perturb_checkpoint

    from marft_agents import export, policy_from_run
    from marft_agents.cli import main as cli

    folder = tmp_path_factory.mktemp("vllm-export")
    run = folder / "run"
    args = ["model=embedded", f"run_dir={run}", "updates=1", "episodes_per_update=4", "eval_episodes=2", "eval_rounds=0"]
    assert cli(["train", "--no-progress", *args, "max_new_tokens=4", "marft.minibatch_size=4", "threads=1"]) == 0
    perturb_checkpoint(run)
    export(run, folder / "adapters", [AGENT])
    export(run, folder / "merged", [AGENT], merged=True)
    return folder, policy_from_run(str(run))[0]


def serve(model: str, work, **options):
    """A float32 vLLM engine on ``model`` (a folder), set up as marft's vllm engine sets up its own."""
    from marft_agents.engines.vllm import configure_environment, route_logs

    configure_environment(work / "vllm-cache", kv_cache_gb=1.0, threads=2)
    route_logs(work / "vllm.log")
    from vllm import LLM

    return LLM(
        model=model,
        dtype="float32",
        seed=0,
        logprobs_mode="processed_logprobs",  # after the temperature: what marft's score returns
        generation_config="vllm",
        enforce_eager=True,
        disable_log_stats=True,
        **options,
    )


def gap(policy, prompt: list[int], response: list[int], adapter: str | None, served: list[float]) -> float:
    """The largest gap between ``served`` log-probs of ``response`` and marft's (``adapter`` None: the untuned base)."""
    logp, _, mask = policy.score([prompt], [response], adapter, TEMPERATURE)
    return (logp[0][mask[0]] - logp.new_tensor(served)).abs().max().item()


def compare(llm, policy, lora_request=None) -> None:
    """``llm`` samples responses to ``AGENT``'s prompts with the log-probs marft's policy gives them."""
    from vllm import SamplingParams

    import marft_envs

    env, prompts = marft_envs.make("marft/MathChain-v0"), []
    for seed in range(3):
        env.reset(seed=seed)
        prompts.append(policy.prompt(env.observe(AGENT), AGENT))
    params = SamplingParams(temperature=TEMPERATURE, top_p=1.0, top_k=0, max_tokens=8, logprobs=0, seed=0, detokenize=False)
    outputs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, lora_request=lora_request, use_tqdm=False)
    for prompt, out in zip(prompts, outputs):
        ids = list(out.outputs[0].token_ids)
        served = [step[t].logprob for step, t in zip(out.outputs[0].logprobs, ids)]
        assert gap(policy, prompt, ids, AGENT, served) <= TOLERANCE
        assert gap(policy, prompt, ids, None, served) > FAR


def shut_down(llm) -> None:
    from marft_agents.engines.vllm import _shutdown

    _shutdown(llm)
    gc.collect()


def test_vllm_serves_the_exported_adapter_on_the_base_and_the_merged_folder(exported, tmp_path):
    from vllm.lora.request import LoRARequest

    from marft_agents import embedded_model_path

    folder, policy = exported
    llm = serve(str(embedded_model_path()), tmp_path, enable_lora=True, max_loras=1, max_lora_rank=8)
    try:
        compare(llm, policy, LoRARequest(AGENT, 1, str(folder / "adapters" / AGENT)))
    finally:
        shut_down(llm)
    llm = serve(str(folder / "merged" / AGENT), tmp_path)  # the tokenizer and chat template come with it
    try:
        compare(llm, policy)
    finally:
        shut_down(llm)
