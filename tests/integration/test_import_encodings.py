"""`pages import` refuses, in one line naming the file, truth text that is not UTF-8 — UTF-16 with its byte-order
mark, UTF-16-LE without one (read as UTF-8 it was stored NUL-interleaved and scored), NUL bytes — and a PDF whose
page tree lists itself (pdfium's error escaped as a traceback); nothing is written."""

from __future__ import annotations

import pytest
from PIL import Image

from quantgate.errors import InputError


def _selfref_pdf() -> bytes:
    """A PDF whose page tree lists itself among its kids (a loop a damaged or hostile file can hold)."""
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>"]
    out, offs = bytearray(b"%PDF-1.4\n"), []
    for i, o in enumerate(objs, 1):
        offs.append(len(out))
        out += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offs)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


@pytest.mark.parametrize("raw,needle", [
    ("# Title\n\nsome text\n".encode("utf-16-le"), "a NUL byte"),
    ("# Title\n".encode("utf-16"), "UTF-16"),
    (b"# Title\n\x00\n", "a NUL byte"),
    (b"# Title \xff\n", "not UTF-8"),
])
def test_truth_that_is_not_utf8_is_refused(tmp_path, raw, needle):
    from quantgate.heldout.importer import ImportOptions, import_pages

    (tmp_path / "src").mkdir()
    Image.new("RGB", (32, 32), "white").save(tmp_path / "src" / "a_pg1.png")
    (tmp_path / "truth").mkdir()
    (tmp_path / "truth" / "a_pg1.md").write_bytes(raw)
    with pytest.raises(InputError) as e:
        import_pages([tmp_path / "src"], tmp_path / "ps", ImportOptions(truth_dir=tmp_path / "truth"))
    msg = str(e.value)
    assert str(tmp_path / "truth" / "a_pg1.md") in msg and needle in msg and "\n" not in msg, msg
    assert not (tmp_path / "ps").exists()


def test_a_pdf_whose_page_tree_lists_itself_is_one_line(tmp_path):
    from quantgate.heldout.importer import ImportOptions, import_pages

    (tmp_path / "src").mkdir()
    pdf = tmp_path / "src" / "loop.pdf"
    pdf.write_bytes(_selfref_pdf())
    with pytest.raises(InputError) as e:
        import_pages([tmp_path / "src"], tmp_path / "ps", ImportOptions())
    msg = str(e.value)
    assert msg.startswith(f"{pdf}: page 2 cannot be read") and "\n" not in msg, msg
    assert not (tmp_path / "ps").exists()
