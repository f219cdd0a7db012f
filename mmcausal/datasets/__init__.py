"""Datasets: generators of the embedded synthetic 'shapes' data (real layouts of ImageNet/ADE20K/COCO)."""
