"""Code copied unchanged from upstream olmOCR-bench (allenai/olmocr, Apache-2.0); see each file's header."""
