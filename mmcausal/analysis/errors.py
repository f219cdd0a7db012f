"""The error of the analysis tools' input (layer or token index, map kind, images, checkpoint)."""
from mmcausal.utils.errors import UserInputError


class AnalysisError(UserInputError, ValueError):
    """An analysis request the model or the data cannot answer; the message says what to change."""
