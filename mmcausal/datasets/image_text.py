"""Image-text datasets for contrastive (CLIP) pre-training: a caption table or image folder, and webdataset shards.

Both give samples ``dict(img_path=..., text=<caption>, ...)``; a pipeline ending in mmpretrain's
``PackInputs(algorithm_keys=['text'])`` puts the caption into ``data_sample.text``.

* :class:`ImageTextDataset` (map-style): OpenCLIP's ``CsvDataset`` table (``--csv-img-key``, ``--csv-caption-key``,
  ``--csv-separator``) or an img2dataset-style folder of images with same-stem ``.txt`` captions. Its pipeline starts
  with ``LoadImageFromFile``.
* :class:`WebDatasetImageText` (iterable): tar shards of ``<key>.jpg`` / ``<key>.txt`` members (img2dataset's
  ``webdataset`` output, LAION's format), decoded here as ``LoadImageFromFile`` would, so its pipeline omits that.
"""
import csv
import os
import os.path as osp
import tarfile
import warnings
from itertools import islice
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Union

import mmcv
import numpy as np
import torch
from mmengine.dataset import Compose
from mmengine.dist import get_dist_info
from mmpretrain.datasets import BaseDataset
from mmpretrain.registry import TRANSFORMS
from torch.utils.data import IterableDataset, get_worker_info

from mmcausal.registry import DATASETS
from mmcausal.utils import ConfigValueError, DatasetNotFoundError
from mmcausal.utils.dataset_check import DatasetFormatError

IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.webp', '.bmp')
WEBDATASET_REQUIREMENT = 'webdataset==1.0.2'
#: Per-worker epoch counters kept in shared memory (DataLoader workers with ids at or above this share counters).
MAX_WORKERS = 256
GENERATE_HINT = '`python tools/dataset_converters/make_shapes_datasets.py --which captions` writes the shapes set'


@DATASETS.register_module()
class ImageTextDataset(BaseDataset):
    """Images and their captions, from a table (OpenCLIP's ``CsvDataset`` format) or from an image folder.

    * ``ann_file`` set: a ``.tsv`` / ``.csv`` file with a header row; the column ``img_key`` holds image paths
      (relative to ``data_root`` + ``data_prefix['img_path']``, or absolute), ``caption_key`` the captions; fields are
      split at ``separator`` (``csv`` quoting rules).
    * ``ann_file=''``: every image under ``data_prefix['img_path']`` (recursively, sorted; extensions
      :data:`IMAGE_EXTENSIONS`) with its caption in the ``.txt`` file of the same stem beside it (img2dataset's
      ``files`` layout). An image without a caption file is an error naming it (a caption cannot be made up).

    ``data_list`` entries are ``dict(img_path=..., text=...)``; ``metainfo`` may be empty. Missing files or columns
    raise one-line :class:`~mmcausal.utils.DatasetNotFoundError` / ``DatasetFormatError`` messages.

    Args:
        ann_file: The caption table, relative to ``data_root``; ``''`` to scan the image folder.
        img_key: Column of the image paths.
        caption_key: Column of the captions.
        separator: Field separator of the table.
        **kwargs: mmpretrain ``BaseDataset``'s (``data_root``, ``data_prefix``, ``pipeline``, ``metainfo``, ...).
    """

    def __init__(self,
                 ann_file: str = '',
                 img_key: str = 'filepath',
                 caption_key: str = 'title',
                 separator: str = '\t',
                 **kwargs) -> None:
        self.img_key, self.caption_key, self.separator = img_key, caption_key, separator
        super().__init__(ann_file=ann_file, **kwargs)

    def load_data_list(self) -> List[Dict[str, str]]:
        """The ``(img_path, text)`` entries of the table or the folder."""
        return self._load_table() if self.ann_file else self._load_folder()

    def _load_table(self) -> List[Dict[str, str]]:
        name = type(self).__name__
        if not osp.isfile(self.ann_file):
            raise DatasetNotFoundError(f'{name}: ann_file {self.ann_file!r} does not exist. Point ann_file at the '
                                       "caption table, or set ann_file='' to read an image folder with .txt captions "
                                       f'({GENERATE_HINT}).')
        with open(self.ann_file, encoding='utf-8', newline='') as file:
            reader = csv.DictReader(file, delimiter=self.separator)
            header = reader.fieldnames or []
            missing = [key for key in (self.img_key, self.caption_key) if key not in header]
            if missing:
                raise DatasetFormatError(f'{name}: {self.ann_file!r} has no column {missing[0]!r} (columns: {header}, '
                                         f'split at {self.separator!r}). Set img_key / caption_key / separator to '
                                         'those of the file.')
            entries = []
            for row in reader:
                path, text = row[self.img_key], row[self.caption_key]
                if path is None or text is None:
                    raise DatasetFormatError(f'{name}: {self.ann_file!r} line {reader.line_num} has fewer fields than '
                                             'its header. Fix the line.')
                entries.append(dict(img_path=osp.join(self.img_prefix, path), text=text))
        return entries

    def _load_folder(self) -> List[Dict[str, str]]:
        name, folder = type(self).__name__, self.img_prefix
        if not osp.isdir(folder):
            raise DatasetNotFoundError(f"{name}: image folder {folder!r} does not exist. Set data_root / "
                                       f"data_prefix=dict(img_path=...) to it, or give ann_file ({GENERATE_HINT}).")
        images = sorted(osp.join(parent, file) for parent, _, files in os.walk(folder) for file in files
                        if file.lower().endswith(IMAGE_EXTENSIONS))
        if not images:
            raise DatasetFormatError(f'{name}: {folder!r} holds no images ({", ".join(IMAGE_EXTENSIONS)}). Point '
                                     'data_prefix at the image folder.')
        entries = []
        for image in images:
            caption = osp.splitext(image)[0] + '.txt'
            if not osp.isfile(caption):
                raise DatasetFormatError(f'{name}: image {image!r} has no caption file {osp.basename(caption)!r} '
                                         'beside it. Add the caption or remove the image.')
            with open(caption, encoding='utf-8') as file:
                entries.append(dict(img_path=image, text=file.read().strip()))
        return entries


def _import_webdataset() -> Any:
    """The ``webdataset`` module, or an ``ImportError`` saying how to install it."""
    try:
        import webdataset
    except ImportError:
        raise ImportError(f'WebDatasetImageText reads tar shards with the webdataset package: pip install '
                          f'{WEBDATASET_REQUIREMENT} -c requirements/constraints.txt') from None
    return webdataset


def _is_local(url: str) -> bool:
    return '://' not in url and not url.startswith('pipe:')


def _buffer_shuffle(samples: Iterable[dict], size: int, rng: np.random.Generator) -> Iterator[dict]:
    """Yield ``samples`` in random order, keeping at most ``size`` of them in memory."""
    buffer: List[dict] = []
    for sample in samples:
        if len(buffer) < size:
            buffer.append(sample)
            continue
        index = int(rng.integers(size))
        buffer[index], sample = sample, buffer[index]
        yield sample
    rng.shuffle(buffer)
    yield from buffer


@DATASETS.register_module()
class WebDatasetImageText(IterableDataset):
    """Image-text samples streamed from webdataset tar shards (``<key>.jpg`` + ``<key>.txt`` members).

    Each sample is decoded as ``LoadImageFromFile`` gives it (``img`` BGR uint8 ``(H, W, 3)`` by
    ``mmcv.imfrombytes``, ``img_shape``, ``ori_shape``) plus ``text`` (the caption), ``img_path``
    (``'<shard>#<key>'``) and, where the shard has a ``label_key`` member, ``gt_label``; then ``pipeline`` (which
    therefore starts after ``LoadImageFromFile``) runs on it.

    Splitting and order, per epoch ``e`` (the number of earlier ``__iter__`` calls of the same DataLoader worker,
    counted in shared memory so that it also advances with non-persistent workers; :meth:`set_epoch` sets it, which
    ``custom_hooks=[dict(type='DatasetEpochHook')]`` does before every epoch, so a resumed run continues the order):

    * ``resampled=False``: the shards (shuffled with ``(seed, e)`` when ``shuffle_buffer > 0``) are split over the
      ranks (``shards[rank::world_size]``) and then the DataLoader workers; every worker needs at least one shard.
    * ``resampled=True`` (OpenCLIP's ``--dataset-resampled``): each worker draws shards with replacement from all
      of them, with ``(seed, e, rank, worker)``.
    * ``shuffle_buffer > 0``: samples pass through a shuffle buffer of that size (0: shard order).

    An epoch holds ``num_samples`` samples over all processes (OpenCLIP's ``--train-num-samples``): ``len()`` is
    ``num_samples // world_size``, split evenly over the workers. Every worker yields exactly its share, going round
    its shards again where they hold fewer samples (shards never split evenly over ranks x workers, and a process
    that ran out early would leave the others waiting in the loss's ``all_gather``). With ``drop_last=True`` each
    worker drops its last partial batch, so an epoch is ``len(dataloader)`` batches only when ``num_samples`` is a
    multiple of ``batch_size * num_workers * world_size``; a few batches fewer otherwise.

    ``on_error='skip'`` (OpenCLIP's ``log_and_continue``, for web-scale shards with the odd broken file) leaves out a
    sample that cannot be decoded, or the rest of a shard that cannot be read, with a warning naming it; ``'raise'``
    stops with one line naming shard and key.

    The dataloader config for mmengine's Runner (it pops ``sampler`` without a default, and an iterable dataset takes
    none)::

        train_dataloader = dict(
            batch_size=64, num_workers=4, persistent_workers=True,
            sampler=None,
            collate_fn=dict(type='default_collate'),  # or leave it out: pseudo_collate
            dataset=dict(type='WebDatasetImageText', data_root='data/shapes/captions',
                         urls='shards/train-{000000..000003}.tar', num_samples=1200, shuffle_buffer=1000,
                         pipeline=[dict(type='RandomResizedCrop', scale=64),
                                   dict(type='PackInputs', algorithm_keys=['text'])]))

    ``num_batch_per_epoch`` cannot be used with it (mmengine slices map-style datasets only).

    Args:
        urls: Shards: a brace pattern (``'shards/train-{000000..000003}.tar'``, several joined by ``'::'``) or a
            list of them; relative local paths are relative to ``data_root``.
        num_samples: Samples of one epoch over all processes.
        data_root: Folder of relative shard paths.
        pipeline: Transforms (dicts built from mmpretrain's ``TRANSFORMS``, or callables).
        shuffle_buffer: Size of the sample shuffle buffer; 0 keeps the shard order and does not shuffle shards.
        seed: Seed of the shard and sample shuffles.
        resampled: Draw shards with replacement instead of splitting them.
        image_keys: Member extensions holding the image, first present wins.
        text_key: Member extension of the caption (UTF-8).
        label_key: Member extension of an integer class label (``gt_label``), read where present; ``None``: never.
        metainfo: Returned as :attr:`metainfo` (e.g. ``dict(classes=...)``).
        on_error: ``'raise'`` or ``'skip'`` (above).
    """

    def __init__(self,
                 urls: Union[str, Sequence[str]],
                 num_samples: int,
                 data_root: str = '',
                 pipeline: Sequence[Union[dict, Callable]] = (),
                 shuffle_buffer: int = 0,
                 seed: int = 0,
                 resampled: bool = False,
                 image_keys: Sequence[str] = ('jpg', 'jpeg', 'png', 'webp'),
                 text_key: str = 'txt',
                 label_key: Optional[str] = 'cls',
                 metainfo: Optional[dict] = None,
                 on_error: str = 'raise') -> None:
        webdataset = _import_webdataset()
        name = type(self).__name__
        if not isinstance(num_samples, int) or num_samples < 1:
            raise ConfigValueError(f'{name}: num_samples must be a positive integer (the samples of one epoch over '
                                   f'all processes), got {num_samples!r}.')
        if shuffle_buffer < 0:
            raise ConfigValueError(f'{name}: shuffle_buffer must be 0 (no shuffle) or positive, got {shuffle_buffer}.')
        patterns = [urls] if isinstance(urls, str) else list(urls)
        shards = [url for pattern in patterns for url in webdataset.shardlists.expand_urls(pattern)]
        self.shards = [osp.join(data_root, url) if _is_local(url) else url for url in shards]
        if not self.shards:
            raise ConfigValueError(f'{name}: urls {urls!r} name no shard. Give a brace pattern or a list of tar files.')
        missing = [url for url in self.shards if _is_local(url) and not osp.isfile(url)]
        if missing:
            raise DatasetNotFoundError(f'{name}: shard {missing[0]!r} does not exist ({len(missing)} of '
                                       f'{len(self.shards)} missing). Fix urls / data_root ({GENERATE_HINT}).')
        if on_error not in ('raise', 'skip'):
            raise ConfigValueError(f"{name}: on_error must be 'raise' or 'skip', got {on_error!r}.")
        self.on_error = on_error
        self.num_samples, self.shuffle_buffer, self.seed, self.resampled = num_samples, shuffle_buffer, seed, resampled
        self.image_keys, self.text_key, self.label_key = tuple(image_keys), text_key, label_key
        self._metainfo = dict(metainfo or {})
        self.pipeline = Compose([TRANSFORMS.build(t) if isinstance(t, dict) else t for t in pipeline])
        self._epochs = torch.zeros(MAX_WORKERS, dtype=torch.int64).share_memory_()

    @property
    def metainfo(self) -> dict:
        """The ``metainfo`` given (a copy)."""
        return dict(self._metainfo)

    def __len__(self) -> int:
        return self.num_samples // get_dist_info()[1]

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``__iter__`` of every worker read epoch ``epoch`` (e.g. after resuming)."""
        self._epochs.fill_(epoch)

    def _worker_rounds(self, epoch: int, rank: int, world_size: int, worker: int,
                       num_workers: int) -> Iterator[Iterable[str]]:
        """The shards one worker reads in ``epoch``, as rounds: its share of the shards again and again (one endless
        round of draws with replacement when resampled)."""
        if self.resampled:
            rng = np.random.default_rng([self.seed, epoch, rank, worker])
            yield (self.shards[int(rng.integers(len(self.shards)))] for _ in iter(int, 1))
            return
        order = list(self.shards)
        if self.shuffle_buffer:
            np.random.default_rng([self.seed, epoch]).shuffle(order)
        mine = order[rank::world_size][worker::num_workers]
        if not mine:
            raise ConfigValueError(f'{type(self).__name__}: {len(self.shards)} shards cannot be split over '
                                   f'{world_size} rank(s) x {num_workers} worker(s). Write more shards, use fewer '
                                   'workers, or set resampled=True.')
        while True:  # its quota is reached even where its shards hold fewer samples (uneven splits)
            yield mine

    def _read_shard(self, url: str) -> Iterator[dict]:
        """The grouped members (``__key__``, ``__url__``, ``<ext>: bytes``) of one shard."""
        webdataset = _import_webdataset()
        samples = iter(webdataset.tariterators.tarfile_samples([dict(url=url)]))
        count, detail = 0, None
        while True:
            try:
                sample = next(samples)
            except StopIteration:
                break
            except (tarfile.TarError, OSError, ValueError) as error:
                detail = error.args[0] if error.args else type(error).__name__
                break
            count += 1
            yield sample
        if detail is not None:
            self._fail(f'{type(self).__name__}: shard {url!r} cannot be read ({detail}). Rewrite it or drop it from '
                       'urls.')
        elif not count:
            self._fail(f'{type(self).__name__}: shard {url!r} holds no samples. Rewrite it or drop it from urls.')

    def _fail(self, message: str) -> None:
        """Raise ``message`` as a ``DatasetFormatError``, or warn with it under ``on_error='skip'``."""
        if self.on_error == 'raise':
            raise DatasetFormatError(message)
        warnings.warn(f'{message} Skipped (on_error=skip).', stacklevel=2)

    def _stream(self, rounds: Iterator[Iterable[str]], rng: np.random.Generator) -> Iterator[dict]:
        """The samples of each round of shards in turn, each round through its own shuffle buffer; stops with one
        line when a whole round yields no sample."""
        for shards in rounds:
            count = 0
            samples = (sample for url in shards for sample in self._read_shard(url))
            if self.shuffle_buffer:
                samples = _buffer_shuffle(samples, self.shuffle_buffer, rng)
            for sample in samples:
                count += 1
                yield sample
            if not count:
                raise DatasetFormatError(f'{type(self).__name__}: no shard of this worker yields a readable sample '
                                         f'({len(self.shards)} shards in urls). Fix urls or the shards.')

    def decode(self, sample: dict) -> dict:
        """``LoadImageFromFile``'s results (plus ``text``, ``img_path``, ``gt_label``) of one grouped sample."""
        where = f'{sample["__url__"]}#{sample["__key__"]}'

        def fail(problem: str) -> DatasetFormatError:
            return DatasetFormatError(f'{type(self).__name__}: sample {where} {problem}. Rewrite the shard or drop '
                                      'the sample.')

        image_key = next((key for key in self.image_keys if key in sample), None)
        if image_key is None:
            raise fail(f'has no image member (.{", .".join(self.image_keys)})')
        if self.text_key not in sample:
            raise fail(f'has no .{self.text_key} caption member')
        try:
            img = mmcv.imfrombytes(sample[image_key], flag='color', channel_order='bgr', backend='cv2')
        except Exception:  # cv2 raises on an empty buffer and returns None on other undecodable bytes
            img = None
        if img is None:
            raise fail(f'.{image_key} is not a readable image')
        try:
            text = sample[self.text_key].decode('utf-8').strip()
        except UnicodeDecodeError:
            raise fail(f'.{self.text_key} is not UTF-8 text') from None
        results = dict(img=img, img_shape=img.shape[:2], ori_shape=img.shape[:2], text=text, img_path=where)
        if self.label_key and self.label_key in sample:
            try:
                results['gt_label'] = int(sample[self.label_key])
            except ValueError:
                raise fail(f'.{self.label_key} is not an integer label') from None
        return results

    def __iter__(self) -> Iterator[Any]:
        rank, world_size = get_dist_info()
        info = get_worker_info()
        worker, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        slot = worker % MAX_WORKERS
        epoch = int(self._epochs[slot])
        self._epochs[slot] += 1
        per_rank = self.num_samples // world_size
        quota = per_rank // num_workers + int(worker < per_rank % num_workers)
        rounds = self._worker_rounds(epoch, rank, world_size, worker, num_workers)
        samples = self._stream(rounds, np.random.default_rng([self.seed, epoch, rank, worker, 1]))
        for results in islice(self._decoded(samples), quota):
            results = self.pipeline(results)
            if results is not None:
                yield results

    def _decoded(self, samples: Iterable[dict]) -> Iterator[dict]:
        """``decode`` of each sample; with ``on_error='skip'`` a broken one is left out, warned."""
        for sample in samples:
            try:
                results = self.decode(sample)
            except DatasetFormatError as error:
                message = str(error)
            else:
                yield results
                continue
            self._fail(message)
