"""Tokenizers of :class:`~.model.ContrastiveCLIP`, registered in mmpretrain's ``TOKENIZER`` registry (where
``CLIPZeroShot`` builds its ``tokenizer``; it has no parent in MMEngine's root registries).

Both are called as ``tokenizer(texts, context_length)`` and return ``(N, context_length)`` int64 ids: ``<start>``,
the tokens, ``<end>``, zero padding, with ``<end>`` the largest id of the vocabulary, so the text tower pools the
``<end>`` position as CLIP does (``argmax`` over the ids). Too long captions are cut and still end in ``<end>``
(OpenCLIP's rule).
"""
import re
from typing import Iterator, List, Mapping, Sequence

import torch
from mmpretrain.registry import TOKENIZER

OPEN_CLIP_REQUIREMENT = 'open_clip_torch==3.3.0'


def pack_token_ids(rows: Sequence[List[int]], start: int, end: int, context_length: int) -> torch.Tensor:
    """``(N, context_length)`` ids: ``start``, each row cut to ``context_length - 2`` ids, ``end``, zeros."""
    out = torch.zeros(len(rows), context_length, dtype=torch.long)
    for i, ids in enumerate(rows):
        ids = [start, *ids[:context_length - 2], end]
        out[i, :len(ids)] = torch.tensor(ids)
    return out


@TOKENIZER.register_module()
class WordTokenizer:
    """One id per word of a fixed vocabulary: for captions with a small closed vocabulary (the shapes captions).

    Ids: 0 padding, 1 unknown word, 2 ``<start>``, 3.. the words in the given order, ``len(words) + 3``
    ``<end>``; the text tower's ``vocab_size`` must be at least :attr:`vocab_size`. Text is lower-cased and split into
    runs of letters (punctuation and digits are dropped).

    Args:
        words: The vocabulary, without special tokens.
    """

    PAD, UNKNOWN, START = 0, 1, 2

    def __init__(self, words: Sequence[str]) -> None:
        if len(set(words)) != len(words):
            raise ValueError('WordTokenizer: the vocabulary lists a word twice; give each word once.')
        self.words = tuple(words)
        self._ids = {word: index + 3 for index, word in enumerate(self.words)}
        self.end = len(self.words) + 3

    @property
    def vocab_size(self) -> int:
        """Number of ids, special tokens included."""
        return self.end + 1

    def get_vocab(self) -> Mapping[str, int]:
        """Word -> id, with ``<|startoftext|>`` and ``<|endoftext|>`` (CLIP's names)."""
        return dict(self._ids, **{'<|startoftext|>': self.START, '<|endoftext|>': self.end})

    def encode(self, text: str) -> List[int]:
        """The ids of the words of ``text`` (no special tokens)."""
        return [self._ids.get(word, self.UNKNOWN) for word in re.findall('[a-z]+', text.lower())]

    def __call__(self, texts: Sequence[str], context_length: int) -> torch.Tensor:
        return pack_token_ids([self.encode(text) for text in texts], self.START, self.end, context_length)


class _LazyVocab(Mapping):
    """The BPE vocabulary of an :class:`OpenCLIPTokenizer`, read when first looked into."""

    def __init__(self, tokenizer: 'OpenCLIPTokenizer') -> None:
        self._tokenizer = tokenizer

    def __getitem__(self, token: str) -> int:
        return self._tokenizer.bpe.encoder[token]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tokenizer.bpe.encoder)

    def __len__(self) -> int:
        return len(self._tokenizer.bpe.encoder)


@TOKENIZER.register_module()
class OpenCLIPTokenizer:
    """CLIP's byte-pair tokenizer (49,408 ids, ``<end>`` = 49407) from OpenCLIP, whose package ships the vocabulary
    file (nothing is downloaded).

    ``open_clip_torch`` is optional (``requirements/optional.txt``) and imported on first use, so a config using
    this tokenizer builds without it; tokenizing without it stops with the install command.
    """

    #: ids of CLIP's vocabulary (``<end>`` = 49407), what the text tower's ``vocab_size`` must cover
    vocab_size = 49408

    def __init__(self) -> None:
        self._bpe = None

    @property
    def bpe(self):
        """``open_clip.tokenizer.SimpleTokenizer``, created on first use."""
        if self._bpe is None:
            try:
                from open_clip.tokenizer import SimpleTokenizer
            except ImportError as error:
                raise ImportError(f'OpenCLIPTokenizer needs OpenCLIP: pip install {OPEN_CLIP_REQUIREMENT} '
                                  '(requirements/optional.txt).') from error
            self._bpe = SimpleTokenizer()
        return self._bpe

    def get_vocab(self) -> Mapping[str, int]:
        """Token -> id (read on first access)."""
        return _LazyVocab(self)

    def __call__(self, texts: Sequence[str], context_length: int) -> torch.Tensor:
        return self.bpe(list(texts), context_length)
