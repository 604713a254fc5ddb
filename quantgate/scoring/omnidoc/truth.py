"""Truth for OmniDocBench's end-to-end metrics, as quantgate's own records: read from OmniDocBench's JSON
(a list of pages, each with ``layout_dets`` and ``page_info``) or from a page of plain markdown.

Bad input: an unknown category, a scored block without its content field, or a truncation relation naming
a block that is not there is an InputError naming the file, the page and the block. A table whose HTML TEDS
cannot read is a listed skip (``TruthPage.skipped``, with the reason): the page's other blocks still count."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from quantgate.errors import InputError
from quantgate.schema.omnidoc import SkippedBlock, TruthBlock, TruthPage
from quantgate.scoring.omnidoc import categories as cat


def _where(path, name: str, index: int, raw: dict) -> str:
    anno = raw.get("anno_id")
    return f"{path}: page {name!r}, block #{index}" + (f" (anno_id {anno})" if anno is not None else "")


def _order(value, where: str) -> int | None:
    # Upstream treats a missing or zero order alike (no place in the reading order).
    if value is None or value == 0:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise InputError(f"{where}: order {value!r} is not a whole number")
    return int(value)


def _block(raw: Any, where: str) -> TruthBlock:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: not an object")
    category = raw.get("category_type")
    if category not in cat.KNOWN:
        raise InputError(f"{where}: unknown category {category!r}; OmniDocBench's categories are "
                         f"{', '.join(sorted(cat.KNOWN))}. Fix or remove the block.")
    field = cat.CONTENT_FIELD.get(category)
    if field and not isinstance(raw.get(field), str):
        raise InputError(f"{where}: a {category} block needs its {field!r} as a string (got {raw.get(field)!r}); "
                         "give the block its content, or mark its category 'abandon' to leave it out")
    values = {k: raw.get(k) for k in ("text", "latex", "html")}
    for k, v in values.items():
        if v is not None and not isinstance(v, str):
            raise InputError(f"{where}: {k!r} is {type(v).__name__}, not a string")
    anno = raw.get("anno_id")
    return TruthBlock(category=category, order=_order(raw.get("order"), where), ignore=bool(raw.get("ignore", False)),
                      anno_ids=[anno] if isinstance(anno, int) else [], **values)


def _truncation_groups(relations: list, where: str) -> list[list[int]]:
    """Groups of anno_ids OmniDocBench marks as one block cut in pieces ('truncated' relations). As
    upstream groups them, a relation is appended (both ids) to every group sharing an id, so the middle of
    a chain a→b→c appears twice ([a, b, b, c]) and its text is repeated in the merged block: kept, because
    the published numbers were computed so (docs/metrics.md measures the difference)."""
    groups: list[list[int]] = []
    for k, rel in enumerate(relations):
        if not isinstance(rel, dict) or rel.get("relation_type") != "truncated":
            continue
        src, tgt = rel.get("source_anno_id"), rel.get("target_anno_id")
        if not isinstance(src, int) or not isinstance(tgt, int):
            raise InputError(f"{where}: extra.relation #{k}: source_anno_id/target_anno_id must be integers")
        joined = [g for g in groups if src in g or tgt in g]
        for g in joined:
            g += [src, tgt]
        if not joined:
            groups.append([src, tgt])
    return groups


def _merge_truncated(blocks: list[TruthBlock], by_id: dict[int, TruthBlock], groups, where: str) -> list[TruthBlock]:
    members = {i for g in groups for i in g}
    kept = [b for b in blocks if not (b.anno_ids and b.anno_ids[0] in members)]
    for g in groups:
        for i in g:
            if i not in by_id:
                raise InputError(f"{where}: a 'truncated' relation names anno_id {i}, which no block has")
            if by_id[i].text is None:
                raise InputError(f"{where}: anno_id {i} is in a 'truncated' relation but has no text")
        pieces = sorted((by_id[i] for i in g), key=lambda b: b.order or 0)
        first = pieces[0]
        kept.append(first.model_copy(update={"text": "".join(p.text for p in pieces),
                                             "anno_ids": [p.anno_ids[0] for p in pieces]}))
    return kept


def _skip_unreadable_tables(page: TruthPage) -> TruthPage:
    from quantgate.scoring.omnidoc.normalize import table_html
    from quantgate.scoring.omnidoc.teds import TableError, check_table

    blocks, skipped = [], list(page.skipped)
    for b in page.blocks:
        if b.category == cat.TABLE:
            try:
                normalised = table_html(b.html or "")
                if not normalised:
                    raise TableError("no <table> in it")
                if check_table(normalised) == 0:
                    raise TableError("the table has no rows or cells")
            except TableError as e:
                skipped.append(SkippedBlock(anno_id=b.anno_ids[0] if b.anno_ids else None, category=b.category,
                                            reason=f"table HTML not scorable by TEDS: {e}"))
                continue
        blocks.append(b)
    return page.model_copy(update={"blocks": blocks, "skipped": skipped})


def _page(raw: Any, k: int, path: Path) -> TruthPage:
    if not isinstance(raw, dict) or not isinstance(raw.get("page_info"), dict):
        raise InputError(f"{path}: page #{k} has no 'page_info' object; is this OmniDocBench's JSON?")
    image = raw["page_info"].get("image_path")
    if not isinstance(image, str) or not image:
        raise InputError(f"{path}: page #{k}: page_info.image_path is missing")
    name = PurePosixPath(image.replace("\\", "/")).name
    dets = raw.get("layout_dets")
    if not isinstance(dets, list):
        raise InputError(f"{path}: page {name!r}: 'layout_dets' is not a list")
    blocks = [_block(d, _where(path, name, i, d if isinstance(d, dict) else {})) for i, d in enumerate(dets)]
    by_id: dict[int, TruthBlock] = {}
    for b in blocks:
        if b.anno_ids:
            by_id[b.anno_ids[0]] = b  # a repeated anno_id: the last one, as upstream
    extra = raw.get("extra") or {}
    groups = _truncation_groups(extra.get("relation") or [], f"{path}: page {name!r}")
    if groups:
        blocks = _merge_truncated(blocks, by_id, groups, f"{path}: page {name!r}")
    attrs = raw["page_info"].get("page_attribute") or {}
    page = TruthPage(image=name, source=str(path), attributes=attrs if isinstance(attrs, dict) else {}, blocks=blocks)
    return _skip_unreadable_tables(page)


def load_truth(path: str | Path) -> dict[str, TruthPage]:
    """OmniDocBench's JSON → page image name → TruthPage."""
    path = Path(path)
    from quantgate.schema.load import load_json

    data = load_json(path, "OmniDocBench truth file")  # under the loader's limits, one error naming file and line
    if not isinstance(data, list):
        raise InputError(f"{path}: OmniDocBench truth is a JSON list of pages; this is a {type(data).__name__}")
    pages: dict[str, TruthPage] = {}
    for k, raw in enumerate(data):
        page = _page(raw, k, path)
        if page.image in pages:
            raise InputError(f"{path}: page {page.image!r} appears twice (pages #{k} and an earlier one)")
        pages[page.image] = page
    return pages


def truth_from_markdown(markdown: str, image: str, source: str = "<markdown>") -> TruthPage:
    """Truth written as markdown, split into blocks as a prediction is (docs/metrics.md): paragraphs are
    text blocks, display math formulas, HTML and pipe tables tables, all in reading order. Markdown cannot
    mark headers or page numbers, so every paragraph is scored as text; LaTeX tables are listed skips."""
    from quantgate.scoring.omnidoc.extract import split_blocks

    blocks, skipped = [], []
    for b in split_blocks(markdown):
        if b.kind == "formula" and b.inline:
            continue
        if b.kind == "latex_table":
            skipped.append(SkippedBlock(anno_id=None, category=cat.TABLE,
                                        reason="LaTeX table in markdown truth: write it as HTML or a pipe table"))
            continue
        order = len(blocks) + 1
        if b.kind == "text":
            blocks.append(TruthBlock(category="text_block", order=order, text=b.content))
        elif b.kind == "formula":
            blocks.append(TruthBlock(category=cat.FORMULA, order=order, latex=b.content))
        else:
            blocks.append(TruthBlock(category=cat.TABLE, order=order, html=b.content))
    return _skip_unreadable_tables(TruthPage(image=image, source=source, blocks=blocks, skipped=skipped))


def parse_truth(text: str, image: str, source: str) -> TruthPage:
    """A page's truth file: a TruthPage record (JSON, ``"kind": "omnidoc_truth_page"``) or markdown."""
    stripped = text.lstrip()
    if stripped.startswith("{") and '"omnidoc_truth_page"' in stripped[:4000]:
        from pydantic import ValidationError

        try:
            return TruthPage.model_validate_json(text)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "the record"
            raise InputError(f"{source}: not a valid OmniDocBench truth record: {where}: {first['msg']} (got "
                             f"{str(first.get('input'))[:80]!r}); import the OmniDocBench JSON again with "
                             "`quantgate pages import --truth FILE.json`") from None
    return truth_from_markdown(text, image=image, source=source)


def truth_markdown(page: TruthPage) -> str:
    """The page's scored blocks as markdown, in reading order, for the metrics that compare whole pages."""
    parts = []
    for b in sorted(page.blocks, key=lambda b: b.order or 0):
        if b.category == cat.FORMULA:
            parts.append(f"$$\n{b.latex}\n$$")
        elif b.category == cat.TABLE:
            parts.append(b.html or "")
        elif b.category in cat.CONTENT_FIELD and b.text:
            parts.append(b.text)
    return "\n\n".join(parts) + "\n"


def write_truth_files(json_path: str | Path, folder: Path) -> int:
    """OmniDocBench's JSON as a truth folder ``pages import --truth`` reads: per page, ``<id>.md`` (the scored
    blocks as markdown, for the whole-page metrics) and ``<id>.omnidoc.json`` (its TruthPage record, for the
    block-matched family; ``io.pageset.OMNIDOC_SUFFIX``). A page's id is its image's file name without the
    extension, as ``pages import`` names an image's page. Returns the number of pages."""
    from quantgate.io.fileio import atomic_write_text
    from quantgate.io.pageset import OMNIDOC_SUFFIX

    pages = load_truth(json_path)
    if not pages:
        raise InputError(f"{json_path}: OmniDocBench truth lists no pages")
    ids: dict[str, str] = {}
    for image, page in pages.items():
        if page.page_id in ids:
            raise InputError(f"{json_path}: images {ids[page.page_id]!r} and {image!r} give the same page id "
                             f"{page.page_id!r}; rename one")
        ids[page.page_id] = image
    folder.mkdir(parents=True, exist_ok=True)
    for page in pages.values():
        atomic_write_text(folder / f"{page.page_id}.md", truth_markdown(page))
        atomic_write_text(folder / f"{page.page_id}{OMNIDOC_SUFFIX}", page.model_dump_json(indent=1) + "\n")
    return len(pages)
