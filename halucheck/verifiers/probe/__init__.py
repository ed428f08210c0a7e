"""Judging by one prompt pass per evidence chunk, nothing decoded (see ``verifier.py``): the fixed prompt and the
chunking (``prompt.py``), the pass's features and their store (``features.py``), the trained head and its file
(``head.py``), and fitting heads on labelled data (``training.py``)."""
