"""Model loading: the embedded tiny model's tokenizer and architecture (``tiny``) and the named real models (``named``).

Training programs that build on these (``marft pretrain``) live in ``marft_agents/pretraining``.
"""

from marft_agents.models.tiny import build_model, build_tokenizer, count_parameters

__all__ = ["build_model", "build_tokenizer", "count_parameters"]
