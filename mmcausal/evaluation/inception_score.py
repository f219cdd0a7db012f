"""Inception Score from class probabilities: exp(E_x KL(p(y|x) || p(y))), as ADM computes it (mean over splits)."""
import torch

from .distances import Features, as_features


def inception_score(probs: Features, splits: int = 1) -> float:
    """Inception Score of class probabilities ``probs`` (N, K) (rows sum to 1), averaged over ``splits``
    consecutive equal parts (ADM: splits of 5,000 samples; the last part takes the remainder).

    K confident predictions spread uniformly over K classes score K; identical predictions score 1.
    """
    probs = as_features(probs)
    if (probs < 0).any() or not torch.allclose(probs.sum(dim=1), torch.ones(len(probs), dtype=torch.float64),
                                               atol=1e-4):
        raise ValueError('probs must be class probabilities: non-negative rows that sum to 1 (apply softmax)')
    if not 1 <= splits <= probs.shape[0]:
        raise ValueError(f'splits must be in [1, {probs.shape[0]}], got {splits}')
    scores = []
    for part in torch.tensor_split(probs, splits):
        marginal = part.mean(dim=0, keepdim=True)
        kl = torch.special.xlogy(part, part) - torch.special.xlogy(part, marginal)
        scores.append(kl.sum(dim=1).mean().exp())
    return float(torch.stack(scores).mean())
