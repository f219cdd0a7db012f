"""A dispatch-level record of what a piece of code makes the host do: copy data between devices, make a tensor
from host values, or read a tensor's value back (on a GPU each waits or synchronises)."""
from typing import List

from torch.utils._python_dispatch import TorchDispatchMode


class HostTransfers(TorchDispatchMode):
    """Records (by ATen name, in order) every ``_to_copy`` whose result is on another device than its input, every
    tensor made from host values (``torch.tensor(...)``: ``lift_fresh``) and every read of a value by the host
    (``.item()``, ``bool(tensor)``: ``_local_scalar_dense``)."""

    HOST_OPS = ('aten::lift_fresh', 'aten::lift_fresh_copy', 'aten::_local_scalar_dense')
    SCALAR_READ = 'aten::_local_scalar_dense'

    def __init__(self) -> None:
        super().__init__()
        self.calls: List[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func._schema.name
        if name in self.HOST_OPS or (name == 'aten::_to_copy' and out.device != args[0].device):
            self.calls.append(name)
        return out
