from .class_attention_pool import ClassAttentionPool
from .simple_feature_pyramid import SimpleFeaturePyramid

__all__ = ['ClassAttentionPool', 'SimpleFeaturePyramid']
