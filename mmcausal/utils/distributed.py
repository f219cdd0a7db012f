"""Ending a distributed run cleanly."""
import torch.distributed as dist


def end_distributed_run() -> None:
    """Destroy the default process group, if this process has one, as torch asks of a program that ends normally.

    A gloo rank that exits with its group alive can abort in the group's destructor (SIGABRT, ``terminate called
    without an active exception``), and torchrun then reports a finished run as failed. Such crashes at exit of
    processes that never call ``destroy_process_group`` are reported in
    https://github.com/pytorch/pytorch/issues/190489.
    """
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
