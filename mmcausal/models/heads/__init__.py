from .defocus_head import DefocusClsHead

__all__ = ['DefocusClsHead']
