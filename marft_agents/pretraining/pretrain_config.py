"""The settings of one ``marft pretrain`` run (saved to ``pretrain.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from marft_agents.models.tiny import DEFAULT_VOCAB_SIZE
from marft_envs.tasks.math.synthetic import LEVELS

BUILD_FIELDS = (
    "vocab_size",
    "tokenizer_problems",
    "hidden_size",
    "num_layers",
    "num_heads",
    "intermediate_size",
    "max_position_embeddings",
)
"""Settings that shape a new model and tokenizer; fixed by the checkpoint when ``init`` is set."""


@dataclass
class PretrainConfig:
    """Settings of one pre-training run (saved to ``pretrain.json``)."""

    init: str | None = None
    """Continue from this checkpoint (``embedded``, a folder or a Hub id; its tokenizer too) instead of building one."""
    max_steps: int | None = 2000
    """Optimizer steps; None to train for ``seconds`` only."""
    seconds: float = 330.0
    """Wall-clock cap of the training loop (data generation included, evaluation excluded)."""
    seed: int = 0
    """Seeds the problems drawn, the batch order and (without ``init``) the tokenizer's corpus and the initial weights."""
    lr: float = 2e-3
    """Peak AdamW learning rate."""
    min_lr_ratio: float = 0.1
    """The cosine schedule ends at ``lr * min_lr_ratio``."""
    warmup_steps: int = 50
    """Linear warm-up from 0 to ``lr``."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    batch_size: int = 32
    """Sequences (prompt + response, right-padded) per optimizer step."""
    grad_clip: float = 1.0
    """Global gradient-norm clip."""
    unfinished_rate: float = 0.0
    """Fraction of the reasoner's multi-step solutions cut short after a random number of steps."""
    role_weights: dict[str, float] = field(default_factory=lambda: {"reasoner": 1.0, "actor": 1.0, "solver": 1.0})
    """Relative frequency of SFT examples per role (``reasoner``/``actor`` of the chain, ``solver`` of solo)."""
    level_weights: dict[int, float] = field(default_factory=lambda: dict.fromkeys(LEVELS, 1.0))
    """Relative frequency of problem levels (1-4) in the SFT data."""
    chunk_problems: int = 512
    """Problems drawn at a time; their examples are grouped into batches by role."""
    sort_by_length: bool = False
    """Also sort each role's examples by length before batching (less padding, less varied batches)."""
    vocab_size: int = DEFAULT_VOCAB_SIZE
    """Upper bound on the BPE vocabulary."""
    tokenizer_problems: int = 3000
    """Train-split problems whose texts (observations, role prompts, solutions) train the BPE."""
    hidden_size: int = 128
    """Width of the new model."""
    num_layers: int = 4
    """Decoder layers of the new model."""
    num_heads: int = 4
    """Attention heads of the new model."""
    intermediate_size: int = 512
    """Width of the new model's feed-forward layers."""
    max_position_embeddings: int = 512
    """The longest sequence the new model takes."""
    eval_n: int = 200
    """Held-out problems for the final evaluation (0 skips it)."""
    eval_samples: int = 4
    """Samples per problem at temperature 1 in the final evaluation (pass@1 and pass@k)."""
    eval_every: float = 0.0
    """Also evaluate the greedy chain on ``eval_every_n`` problems every this many training seconds (0: never)."""
    eval_every_n: int = 100
    """Held-out problems for each periodic evaluation."""
    threads: int | None = None
    """``torch.set_num_threads`` for the run; None leaves torch's default."""
