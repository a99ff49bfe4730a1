"""``marft pretrain``: supervised pre-training of the embedded tiny model (a program, beside the trainer).

It uses the policy, the chat templates and the rollout engine; model loading stays below them in
``marft_agents/models`` (``tiny``, ``named``), so no import runs back up.
"""
