"""One generation path: whatever samples from a policy goes through an engine (``marft_agents/engines/``).

The rule, read from the source with :mod:`ast` (nothing imported):

- outside ``marft_agents/engines/`` and ``marft_agents/models/``, a ``<x>.generate(...)`` call is made
  on an engine only: ``<x>`` is a name or attribute whose last part is ``engine`` or ends in ``_engine``
  (``engine``, ``self.engine``, ``self.rollout.engine``); and no module imports ``generate`` from the
  model layer's helper (``from marft_agents.models.lm import generate``);
- inside ``marft_agents/models/``, only the helper :func:`marft_agents.models.lm.generate` calls a
  model's ``generate``; the rest of the layer calls ``lm.generate``, or a team hands the call to its member
  policy (``self.member(adapter).generate``, which calls ``lm.generate``).

Also: the TRL rollout's engine (``engines/trl.py``) keeps a trainer's sampling settings and its
log-probs are the distribution that sampled (the TRL tests proper need ``trl``: ``make test-adapters``).
"""

from __future__ import annotations

import ast
from importlib import resources
from pathlib import Path

import pytest
import torch
import transformers

from marft_agents.engines.trl import TRLEngine
from marft_agents.models.sampling import Request, Sampling

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "marft_agents"


def _last_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def violations(source: str, layer: str, filename: str = "<module>") -> list[str]:
    """The calls and imports in ``source`` that break the rule for a module of ``layer`` (``models``, ``engines`` or any other)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "marft_agents.models.lm" and layer not in ("models", "engines"):
            if any(alias.name == "generate" for alias in node.names):
                found.append(f"{filename}:{node.lineno}: imports generate from marft_agents.models.lm")
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "generate"):
            continue
        receiver = node.func.value
        name = _last_name(receiver) or ast.unparse(receiver)
        where = f"{filename}:{node.lineno}: {ast.unparse(node.func)}(...)"
        if layer == "engines":
            continue
        if layer == "models":
            if name not in ("lm", "self.member(adapter)") and Path(filename).name != "lm.py":
                found.append(where + " (in models/, only lm.generate calls a model's generate)")
        elif not (name == "engine" or name.endswith("_engine")):
            found.append(where + " (outside engines/ and models/, generate through an Engine)")
    return found


def test_the_rule_on_hand_made_modules():
    engines = "self.engine.generate(requests, sampling)\nengine.generate(r, s)\nself.rollout.engine.generate(r, s)"
    assert violations(engines, "rollout") == []
    assert violations("tree_engine.generate(r, s)\ngenerate(trainer, observations)", "rollout") == []
    for bad in ("model.generate(input_ids=ids)", "lm.generate(model, prompts)", "self.policy.generate(p, a, s)", "unwrap(m).generate()"):
        assert len(violations(bad, "rollout")) == 1, bad
    assert len(violations("from marft_agents.models.lm import generate, left_pad", "pretraining")) == 1
    assert violations("from marft_agents.models.lm import generate", "engines") == []
    assert violations("lm.generate(self.model, prompts)", "models", "policy.py") == []
    assert len(violations("self.model.generate(ids)", "models", "policy.py")) == 1
    assert violations("self.member(adapter).generate(p, adapter, s)", "models", "team.py") == []
    assert len(violations("self.member(adapter).base.generate(ids)", "models", "team.py")) == 1
    assert violations("model.generate(ids)", "models", "lm.py") == []
    assert violations("self.llm.generate(prompts)\nself.policy.generate(p, a, s)", "engines") == []


def test_only_engines_and_the_model_layers_helper_call_generate():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 40 and PACKAGE / "rollout" / "trl.py" in files
    found = []
    for path in files:
        parts = path.relative_to(PACKAGE).parts
        layer = parts[0] if len(parts) > 1 else ""
        found += violations(path.read_text(), layer, str(path.relative_to(ROOT)))
    assert found == [], "generation outside the engines:\n" + "\n".join(found)


# -- the TRL rollout's engine, without TRL -------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_lm():
    """A tiny randomly initialised Llama with the embedded model's tokenizer (near-uniform sampling)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(resources.files("marft_agents").joinpath("assets/tiny-math")))
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return transformers.LlamaForCausalLM(config).eval(), tokenizer


def generation_config(tokenizer, **overrides):
    ids = dict(pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    args = dict(max_new_tokens=6, do_sample=True, temperature=0.7, top_k=5, **ids)
    return transformers.GenerationConfig(**{**args, **overrides})


def test_trl_engine_logprobs_are_those_of_the_settings_that_sampled(tiny_lm):
    model, tokenizer = tiny_lm
    config = generation_config(tokenizer)
    engine = TRLEngine(model, tokenizer, config, [tokenizer.eos_token_id])
    assert engine.sampling == Sampling(temperature=0.7, max_new_tokens=6)
    prompts = [[1, 5, 9, 11], [1, 5, 9, 11, 12, 13, 14, 15], [1, 7]]  # different lengths: the batch is left-padded
    torch.manual_seed(0)
    gen = engine.generate([Request(p, "any adapter") for p in prompts], engine.sampling)
    assert engine.calls == 1 and not config.output_scores  # the caller's config is left as it was
    for prompt, ids, logps, text in zip(prompts, gen.responses, gen.token_logps, gen.texts):
        assert 1 <= len(ids) == len(logps) <= 6
        with torch.no_grad():
            logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1] / 0.7  # (T, V): what each token was drawn from
        kept = logits.topk(5, dim=-1).values[:, -1:]  # (T, 1): top-k keeps the 5 largest
        expected = logits.masked_fill(logits < kept, float("-inf")).log_softmax(-1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
        torch.testing.assert_close(logps, expected, atol=1e-4, rtol=1e-4)
        assert logps.min() > -3.0  # near-uniform top-5: about log(1/5); over the whole vocabulary it would be about -log(V)
        assert text == tokenizer.decode(ids, skip_special_tokens=True)


def test_trl_engine_cuts_at_the_first_end_token_and_refuses_other_sampling(tiny_lm):
    model, tokenizer = tiny_lm
    engine = TRLEngine(model, tokenizer, generation_config(tokenizer), range(len(tokenizer)))  # every token ends a response
    gen = engine.generate([Request([1, 5, 9], "a"), Request([1, 7], "b")], engine.sampling)
    assert [len(r) for r in gen.responses] == [1, 1] and [len(lp) for lp in gen.token_logps] == [1, 1]
    with pytest.raises(ValueError, match="pass engine.sampling"):
        engine.generate([Request([1, 5], "a")], Sampling(temperature=1.0, max_new_tokens=6))
