"""quantgate: is a quantized document-parsing VLM as good as BF16 on *your* pages, and how much faster?"""

__version__ = "0.1.0"
