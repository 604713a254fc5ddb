"""A small lm-eval task made from a page set, so the lm-eval path works offline.

``quantgate_page_heading``: the page image and the study's prompt go to the model; the first
markdown heading of its answer must equal the page's heading exactly (lm-eval ``exact_match``).
It is written as a plain lm-eval task folder (YAML + JSONL + a two-line ``utils.py``), passed with
``--include-path``, exactly as a user's own local tasks are.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from quantgate.errors import InputError
from quantgate.io.fileio import atomic_write_text

PAGE_TASK = "quantgate_page_heading"
_HEADING = re.compile(r"^#+\s*(.+?)\s*$", re.M)

TASK_YAML = """# written by quantgate (quantgate.lmeval.tasks); regenerate rather than edit
task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_image: !function utils.doc_to_image
doc_to_text: {prompt}
doc_to_target: heading
generation_kwargs:
  until: []  # no stop strings: transformers serve 5.17 fails on them with VLM processors
  max_gen_toks: {max_tokens}
  temperature: 0
  do_sample: false
filter_list:
  - name: heading
    filter:
      - function: regex
        regex_pattern: "#+[ \\t]*([^\\n]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
  source: quantgate page set {pageset_sha256}
"""

UTILS = '''# lm-eval loads this with the task ("!function utils.doc_to_image"); the code lives in quantgate.
from pathlib import Path

from quantgate.lmeval.task_utils import page_image


def doc_to_image(doc):
    return page_image(Path(__file__).resolve().parent, doc)
'''
IMAGES = "images"  # the task folder's copies of page images that lie outside the study folder


def write_page_task(pageset_dir: Path, out_dir: Path, *, prompt: str, split: str = "heldout",
                    limit: int | None = None, max_tokens: int = 48, root: Path | None = None) -> Path:
    """Write the task folder; returns it (pass it as the include path). Each document names its page by id and
    its image by a path relative to the task folder (lm-eval's doc_hash covers the document, so an
    absolute path made a moved study's documents differ): the page set's own image when it lies inside ``root``
    (the study folder), else a copy under the task folder's ``images/``."""
    import os
    import shutil

    from quantgate.io.pageset import load_pageset

    ps = load_pageset(pageset_dir)
    out_dir = Path(out_dir)
    rows = []
    for p in ps.split(split)[: limit or None]:
        if not p.truth:
            continue
        m = _HEADING.search(ps.truth_text(p))
        if m:
            image = ps.image_path(p)
            if root is None or not image.resolve().is_relative_to(Path(root).resolve()):
                copy = out_dir / IMAGES / f"{p.id}{image.suffix}"
                if not copy.is_file() or copy.read_bytes() != image.read_bytes():
                    copy.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(image, copy)
                image = copy
            rows.append({"doc_id": p.id, "image": Path(os.path.relpath(image.resolve(), out_dir.resolve())).as_posix(),
                         "sha256": p.sha256, "heading": m.group(1)})
    if len(rows) < 2:
        raise InputError(f"{pageset_dir}: the page task needs at least 2 {split} pages whose truth has a markdown "
                         f"heading; found {len(rows)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    data = out_dir / f"{PAGE_TASK}.jsonl"
    atomic_write_text(data, "".join(json.dumps(r) + "\n" for r in rows))
    atomic_write_text(out_dir / f"{PAGE_TASK}.yaml", TASK_YAML.format(
        task=PAGE_TASK, data=json.dumps(str(data.resolve())), prompt=json.dumps(prompt), max_tokens=max_tokens,
        pageset_sha256=ps.sha256[:12]))
    atomic_write_text(out_dir / "utils.py", UTILS)
    return out_dir
