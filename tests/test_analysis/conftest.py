"""Fixtures of the analysis tests: one thread, a folder of images."""
from pathlib import Path

import numpy as np
import pytest
from PIL import Image


@pytest.fixture(scope='module', autouse=True)
def _one_thread(single_thread):
    """Every analysis test runs its tiny models single-threaded."""


@pytest.fixture(scope='session')
def image_folder(tmp_path_factory) -> Path:
    """Three random 64 x 64 RGB PNGs (the twins' input size)."""
    folder = tmp_path_factory.mktemp('analysis_images')
    rng = np.random.default_rng(0)
    for index in range(3):
        Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(folder / f'{index}.png')
    return folder
