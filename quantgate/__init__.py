"""quantgate: is a quantized document-parsing VLM as good as BF16 on *your* pages, and how much faster?"""

__version__ = "0.1.0"
__all__ = ["compare_outputs"]


def __getattr__(name: str):
    """``quantgate.compare_outputs`` loaded on first use, so that ``import quantgate`` stays light (no numpy,
    scipy or rapidfuzz until a verdict is asked for)."""
    if name == "compare_outputs":
        import importlib

        return importlib.import_module("quantgate.study.outputs").compare_outputs
    raise AttributeError(f"module 'quantgate' has no attribute {name!r}")
