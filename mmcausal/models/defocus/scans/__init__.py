"""Fast paths of De-focus Mamba's selective scan, each equal to :func:`~..mamba.sequential_selective_scan` (tested
against it): the chunked PyTorch scan (:mod:`.chunked`), the CPU C++ kernel (:mod:`.cpu`), the Triton kernels
(:mod:`.triton`, :mod:`.triton_kernels`) and the closed form over chunks for exports (:mod:`.segsum`)."""
from mmcausal.utils.errors import UserInputError


class ScanConfigError(UserInputError, ValueError):
    """An invalid selective-scan setting (unknown implementation, unavailable kernel, bad chunk size)."""
