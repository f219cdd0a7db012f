"""The stack check that runs before mmpretrain is imported."""
import importlib.metadata

import pytest

from mmcausal.stack_check import refuse_transformers_5


def _versions(monkeypatch, **installed: str) -> None:
    def version(distribution: str) -> str:
        if distribution not in installed:
            raise importlib.metadata.PackageNotFoundError(distribution)
        return installed[distribution]
    monkeypatch.setattr(importlib.metadata, 'version', version)


def test_transformers_5_beside_mmpretrain_1_is_refused_in_one_line(monkeypatch):
    _versions(monkeypatch, mmpretrain='1.2.0', transformers='5.17.0')
    with pytest.raises(ImportError) as error:
        refuse_transformers_5()
    message = str(error.value)
    assert 'transformers>=4.28,<5' in message and '5.17.0' in message and '\n' not in message


@pytest.mark.parametrize('transformers', [None, '4.46.3'])
def test_transformers_4_or_none_passes(monkeypatch, transformers):
    _versions(monkeypatch, mmpretrain='1.2.0', **({'transformers': transformers} if transformers else {}))
    refuse_transformers_5()
