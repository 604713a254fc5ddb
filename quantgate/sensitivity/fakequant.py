"""Fake quantization in memory with llmcompressor's own modifier and compressed-tensors' own
forward: no quantizer is written here.

For one format, every candidate module gets the scheme at once through ``QuantizationModifier``
(the same object ``quantgate quantize`` hands to ``oneshot``), driven through the lifecycle
llmcompressor's pipelines run: initialize → start calibration → calibration forwards with
quantization disabled (so each observer sees BF16 activations, as in the basic pipeline) →
weight observers and qparams (``on_sequential_epoch_end``) → end calibration (frozen). Afterwards
quantization is switched on for one group at a time (``quantization_enabled``), so each forward
measures that group alone; the weights themselves are never modified (compressed-tensors
fake-quantizes them inside the forward) and the schemes are removed again on exit.

One more thing ``oneshot`` does to every model it quantizes is measured apart (``oneshot_norms``):
its round trip of offset-norm weights, a damage every variant carries whatever its recipe."""

from __future__ import annotations

import math
from contextlib import contextmanager


@contextmanager
def oneshot_norms(model):
    """The model as llmcompressor's ``oneshot`` leaves its offset norms (``x * (1 + w)``, e.g.
    Qwen3.5's RMSNorm): 0.14 converts them to ``1 + w`` for calibration and back, in the weights'
    own dtype, which rounds BF16 norm weights. Inside, the rounded weights; after, the originals.
    Yields the number of parameters the round trip changed."""
    import torch
    from llmcompressor.modeling.offset_norm import norm_calibration_context

    saved = {n: p.detach().clone() for n, p in model.named_parameters()
             if "norm" in type(model.get_submodule(n.rpartition(".")[0])).__name__.lower()}
    with norm_calibration_context(model):
        pass
    params = dict(model.named_parameters())
    changed = sum(not torch.equal(params[n], v) for n, v in saved.items())
    try:
        yield changed
    finally:
        with torch.no_grad():
            for n, v in saved.items():
                params[n].copy_(v)


class FormatSession:
    def __init__(self, model, lc_recipe: dict, calibration=None):
        self.model, self.lc_recipe, self.calibration = model, lc_recipe, calibration
        self.calibration_s = 0.0

    def __enter__(self):
        import time

        from compressed_tensors.quantization import disable_quantization
        from llmcompressor.modifiers.quantization import QuantizationModifier
        from llmcompressor.utils import calibration_forward_context
        from llmcompressor.utils.helpers import DisableQuantization

        stage = self.lc_recipe["quant_stage"]["quant_modifiers"]["QuantizationModifier"]
        self.modifier = mod = QuantizationModifier(**stage)
        mod.initialize_quantization(self.model)
        mod.start_calibration(self.model)
        self.needs_data = bool(mod.requires_calibration_data)
        if self.needs_data:
            t0 = time.time()
            # the observers see what oneshot's calibration sees: its rounded offset norms
            with oneshot_norms(self.model), calibration_forward_context(self.model), DisableQuantization(self.model):
                dev = next(self.model.parameters()).device
                for sample in self.calibration():
                    self.model(**{k: v.to(dev) for k, v in sample.items()})
            self.calibration_s = time.time() - t0
        # what the basic and data-free pipelines trigger after their forwards
        mod.on_sequential_epoch_end(None, None, modules=list(self.model.modules()))
        mod.end_calibration(self.model)
        self.model.apply(disable_quantization)
        self.modules = {n: m for n, m in self.model.named_modules() if hasattr(m, "quantization_scheme")}
        return self

    @contextmanager
    def only(self, names: list[str]):
        """Quantization on for ``names`` alone."""
        from compressed_tensors.quantization import disable_quantization, enable_quantization

        try:
            for n in names:
                enable_quantization(self.modules[n])
            yield
        finally:
            for n in names:
                disable_quantization(self.modules[n])

    def module_bytes(self, name: str) -> int:
        return quantized_bytes(self.modules[name])

    def __exit__(self, *exc):
        from compressed_tensors.quantization import QuantizationMetadata

        for m in self.model.modules():
            if hasattr(m, "quantization_scheme") or hasattr(m, "quantization_status"):
                QuantizationMetadata.clear_quantization(m)
                for attr in ("quantization_status", "quantization_enabled"):
                    if hasattr(m, attr):
                        delattr(m, attr)
        self.modifier.remove_hooks()
        return False


def quantized_bytes(module) -> int:
    """Bytes the module's weight takes in a compressed-tensors checkpoint: the packed payload plus
    every scale saved beside it (zero points of symmetric schemes are not saved)."""
    args = module.quantization_scheme.weights
    out_f, in_f = module.weight.shape
    if args is None:
        return module.weight.numel() * module.weight.element_size()
    total = 0
    if args.type == "int" and args.num_bits < 8:  # pack-quantized: int32 words per row, plus weight_shape
        total += out_f * math.ceil(in_f * args.num_bits / 32) * 4 + 16
    else:
        total += out_f * math.ceil(in_f * args.num_bits / 8)
    for name, p in module.named_parameters(recurse=False):
        if name in ("weight", "bias") or not name.startswith(("weight_", "input_", "output_")):
            continue
        if name.endswith("zero_point"):
            base = {"weight": "weights", "input": "input_activations", "output": "output_activations"}[name.split("_")[0]]
            qa = getattr(module.quantization_scheme, base)
            if qa is None or qa.symmetric:
                continue
        total += p.numel() * p.element_size()
    return total
