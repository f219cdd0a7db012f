"""SiT's transport objective (SiT, SiT-LLaMA): the linear interpolant with velocity prediction, ODE and SDE
samplers."""
from .interpolant import LinearInterpolant, MissingOptionalDependency

__all__ = ['LinearInterpolant', 'MissingOptionalDependency']
