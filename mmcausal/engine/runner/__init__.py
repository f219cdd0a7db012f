from .exact_resume_loops import ExactResumeEpochBasedTrainLoop, ExactResumeIterBasedTrainLoop, seeded_dataloader_cfg

__all__ = ['ExactResumeEpochBasedTrainLoop', 'ExactResumeIterBasedTrainLoop', 'seeded_dataloader_cfg']
