"""Running models outside training: ONNX export checked by ONNX Runtime (:mod:`.onnx_export`)."""
from .onnx_export import (
    DEFAULT_OPSET,
    INPUT_NAME,
    ExportError,
    NetworkOutputs,
    OnnxExport,
    TensorOutputs,
    build_export_model,
    export_onnx,
    exportable_part,
    non_standard_ops,
    onnxruntime_outputs,
)

__all__ = ['DEFAULT_OPSET', 'INPUT_NAME', 'ExportError', 'NetworkOutputs', 'OnnxExport', 'TensorOutputs',
           'build_export_model', 'export_onnx', 'exportable_part', 'non_standard_ops', 'onnxruntime_outputs']
