"""One case of ``tools/analysis_tools/benchmark.py``: the time and memory of a step of a spec's model at one size
and batch (:func:`measure`).

A case builds the model (:mod:`mmcausal.analysis.benchmark_models`), runs one warm-up step and ``repeats`` timed
steps: a forward (inference, no grad) or, with ``train``, a training-mode forward + backward of the summed mean
squares of the outputs; a generator (without ``backbone_only``) samples a batch with its preset. Measured: the median
step time, the first step's time (with ``compile``, the compilation), the peak memory (the process's peak RSS on CPU,
``max_memory_allocated`` on CUDA), the part of it above the built model ("activation") and, with ``train``, the exact
size of what autograd keeps for backward (distinct storages reached by saved-tensor hooks, parameters excluded;
measured on an extra forward after the timed steps). ``amp`` runs every step under bf16 autocast; ``compile`` runs the
model under ``torch.compile``; ``onnxruntime`` exports it to ONNX once (in a process of its own, so that the export's
memory is not the case's) and times runs of an ONNX Runtime session instead.
"""
import hashlib
import multiprocessing
import os.path as osp
import resource
import statistics
import tempfile
import time
from typing import Callable, Dict, Optional, Tuple

import torch

from .benchmark_models import build_model, example_inputs, is_diffusion_network, is_generator, parse_size


def _outputs(model: torch.nn.Module, inputs: Tuple[torch.Tensor, ...], backbone_only: bool):
    outs = model(*inputs) if backbone_only else model(*inputs, mode='tensor')
    return outs if isinstance(outs, (tuple, list)) else (outs, )


def saved_for_backward(model: torch.nn.Module, forward: Callable[[], object]) -> int:
    """Bytes of the distinct non-parameter storages autograd keeps for the backward of ``forward()``."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: Dict[int, int] = {}

    def record(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(record, lambda tensor: tensor):
        forward()
    return sum(saved.values())


def export_for_onnxruntime(module: torch.nn.Module, shape: Tuple[int, ...], backbone_only: bool, onnx_path: str):
    """Export ``module`` (a whole model, or a backbone with ``backbone_only``) at the fixed input ``shape``."""
    from mmcausal.deployment import TensorOutputs, export_onnx, exportable_part
    part = TensorOutputs(module, 'module') if backbone_only else exportable_part(module)
    export_onnx(part.eval(), onnx_path, shape, check=False)


def export_case(spec: str, size: str, batch: int, backbone_only: bool, onnx_path: str) -> None:
    """Export the case's model (built as :func:`measure` builds it) at the case's input shape to ``onnx_path``."""
    torch.manual_seed(0)
    module = build_model(spec, backbone_only)
    shape = tuple(example_inputs(module, batch, parse_size(size), 'cpu')[0].shape)
    export_for_onnxruntime(module, shape, backbone_only, onnx_path)


def _export_in_own_process(spec: str, size: str, batch: int, backbone_only: bool, onnx_path: str) -> None:
    """:func:`export_case` in a fresh interpreter, whose memory is not this process's peak."""
    process = multiprocessing.get_context('spawn').Process(target=export_case,
                                                           args=(spec, size, batch, backbone_only, onnx_path))
    process.start()
    process.join()
    if process.exitcode:
        raise RuntimeError(f'exporting {spec} at {size}, batch {batch} to ONNX failed (exit code {process.exitcode}; '
                           'its traceback is above)')


def onnxruntime_step(images: torch.Tensor, onnx_path: str):
    """A step that runs the exported file ``onnx_path`` in ONNX Runtime on ``images``, with torch's number of
    intra-op threads."""
    import onnxruntime

    from mmcausal.deployment import INPUT_NAME
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    session = onnxruntime.InferenceSession(onnx_path, options, providers=['CPUExecutionProvider'])
    feed = {INPUT_NAME: images.numpy()}
    return lambda: session.run(None, feed)


def measure(spec: str, size: str, batch: int, repeats: int, backbone_only: bool, train: bool, device: str,
            amp: bool = False, compile: bool = False, onnxruntime: bool = False,
            onnx_dir: Optional[str] = None) -> dict:
    """One case (see the module docstring); ``size`` is ``S`` or ``HxW``; ``compile``: under ``torch.compile``;
    ``onnxruntime``: exported and run by ONNX Runtime (inference on the CPU), the file kept in ``onnx_dir``."""
    torch.manual_seed(0)
    module = build_model(spec, backbone_only).to(device)
    module.train(train)  # not chained: some upstream backbones' train() returns None
    params = sum(p.numel() for p in module.parameters())
    model = torch.compile(module) if compile else module
    inputs = example_inputs(module, batch, parse_size(size), device)
    images = inputs[0]
    if onnxruntime and (is_diffusion_network(module) or is_generator(module)):
        raise SystemExit(f'{spec}: --onnxruntime measures image models; export a diffusion network with '
                         'tools/deployment/pytorch2onnx.py --network.')
    if train and is_generator(module):
        raise SystemExit(f'{spec}: a generation config trains its diffusion network: add --backbone-only to time '
                         'that (without --train the whole model times its sampler).')
    if onnxruntime:
        key = hashlib.sha1(f'{spec}|{size}|{batch}|{backbone_only}'.encode()).hexdigest()[:16]
        onnx_path = osp.join(onnx_dir or tempfile.gettempdir(), f'{key}.onnx')
        if not osp.isfile(onnx_path):
            _export_in_own_process(spec, size, batch, backbone_only, onnx_path)
        run_session = onnxruntime_step(images, onnx_path)

    def step() -> None:
        if onnxruntime:
            run_session()
            return
        with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
            if train:
                sum(out.float().square().mean() for out in _outputs(model, inputs, backbone_only)).backward()
                module.zero_grad(set_to_none=True)
            else:
                with torch.no_grad():
                    _outputs(model, inputs, backbone_only)
        if device == 'cuda':
            torch.cuda.synchronize()

    if device == 'cuda':
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    step()  # warm-up (and compilation); its peak is the peak of every step
    first_step = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() if device == 'cuda' else \
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    label = f'{spec} (onnxruntime)' if onnxruntime else f'{spec} (compiled)' if compile else spec
    row = dict(spec=label, size=size, batch=batch, params=params,
               images_per_s=batch / seconds, ms=seconds * 1e3, first_step_s=first_step, peak_mib=peak / 2**20,
               activation_mib=(peak - before) / 2**20)
    if train:  # after the timed steps: this forward's graph leaves the peak above untouched
        with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
            row['saved_mib'] = saved_for_backward(module, lambda: _outputs(model, inputs, backbone_only)) / 2**20
    return row
