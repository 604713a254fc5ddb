"""Speed measured, not modelled: decode profiles of ``vllm serve`` read into a cost table per format
× layer group × concurrency (``costtable``), the predicted speed-up of a recipe by it (``predict``), what bounds
a variant's step (``explain``), and the GPU run that takes the profiles (``profile``)."""
