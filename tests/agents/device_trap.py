"""A trap for tensors made without a device: the CPU-only proof that training code places every tensor it makes.

On a CPU-only machine every tensor lands on the CPU whether or not the code says where, so a
``torch.zeros(n)`` that would sit on the CPU beside a GPU model (and fail, or copy on every step, once
the model is on a GPU) passes every numeric test here. :class:`DeviceTrap` makes such a line fail on
the CPU: while it is active, a tensor factory (:data:`FACTORIES`) called from the watched code
(``marft_agents`` by default) without a ``device=`` raises :class:`ImplicitDevice`, naming the line.
A factory given another tensor to copy (``torch.tensor(t)``, ``torch.as_tensor(t)``) keeps that
tensor's device and passes. Library code (torch's ``nn.Linear``, transformers, peft) is not
watched: the caller checked is the frame that called the factory itself.

Why not ``torch.set_default_device("meta")``: a ``torch.zeros(3)`` would then make a meta tensor and
raise nothing until it met real data (and not at all if it never did); the trap raises at the
line that made it. ``tests/agents/test_device.py`` shows it raising on a deliberate ``torch.zeros(3)``.
"""

from __future__ import annotations

import sys

import torch
from torch.overrides import TorchFunctionMode

FACTORIES = frozenset(
    {
        torch.tensor,
        torch.as_tensor,
        torch.scalar_tensor,
        torch.zeros,
        torch.ones,
        torch.empty,
        torch.full,
        torch.arange,
        torch.linspace,
        torch.logspace,
        torch.eye,
        torch.rand,
        torch.randn,
        torch.randint,
        torch.randperm,
        torch.empty_strided,
    }
)
"""Functions that make a tensor on torch's default device unless told ``device=``."""


class ImplicitDevice(AssertionError):
    """A watched line made a tensor without saying on which device."""


class DeviceTrap(TorchFunctionMode):
    """While active, a :data:`FACTORIES` call without ``device=`` from a watched module raises :class:`ImplicitDevice`."""

    def __init__(self, watch: tuple[str, ...] = ("marft_agents",)):
        super().__init__()
        self.watch = watch
        """Module name prefixes whose calls are checked (``__name__`` of the calling frame)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in FACTORIES and kwargs.get("device") is None and not _copies_a_tensor(func, args):
            caller = sys._getframe(1)  # factories are C functions: the frame below is the line that called one
            module = caller.f_globals.get("__name__", "")
            if module.startswith(self.watch):
                raise ImplicitDevice(
                    f"{module}:{caller.f_lineno} calls torch.{func.__name__} without device=: "
                    "the tensor would sit on torch's default device, not the model's"
                )
        return func(*args, **kwargs)


def _copies_a_tensor(func, args) -> bool:
    return func in (torch.tensor, torch.as_tensor) and bool(args) and isinstance(args[0], torch.Tensor)
