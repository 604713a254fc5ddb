"""Whether a tensor-parallel size fits a model's heads, read from its ``config.json`` before anything starts
. vLLM shards every head dimension over the TP ranks and refuses, minutes into a start, a size
that does not divide them. The rules, from vLLM 0.26's source (not measured here):

- attention: ``num_attention_heads`` divisible by TP (``ModelConfig.verify_with_parallel_config``);
  ``num_key_value_heads`` divisible by TP, or, when TP is larger, TP divisible by it (the KV heads are
  replicated: ``QKVParallelLinear``);
- Gated DeltaNet linear attention (Qwen3.5 / Qwen3-Next): ``linear_num_key_heads`` and
  ``linear_num_value_heads`` divisible by TP (``divide(num_v_heads, tp_size)`` in its layer);
- the vision encoder's ``num_heads`` divisible by TP, unless the server runs the encoder data-parallel
  (``--mm-encoder-tp-mode data``)."""

from __future__ import annotations

from pathlib import Path

from quantgate.errors import DataError, InputError
from quantgate.schema.load import load_json
from quantgate.serve.backends.transformers import _flag_value


def head_counts(config: dict) -> dict[str, int]:
    """``{field path: count}`` of every head count vLLM shards, from a model's ``config.json`` (a VLM keeps its
    language model's in ``text_config``)."""
    text = config.get("text_config") or config
    found = {}
    for k in ("num_attention_heads", "num_key_value_heads", "linear_num_key_heads", "linear_num_value_heads"):
        if isinstance(text.get(k), int):
            found[("text_config." if "text_config" in config else "") + k] = text[k]
    vision = config.get("vision_config") or {}
    for k in ("num_heads", "num_attention_heads"):
        if isinstance(vision.get(k), int):
            found[f"vision_config.{k}"] = vision[k]
            break
    return found


def tp_problems(counts: dict[str, int], tp: int, encoder_data_parallel: bool = False) -> list[str]:
    """What a TP size breaks: one phrase per head count it does not fit."""
    bad = []
    for field, n in counts.items():
        if field.startswith("vision_config.") and encoder_data_parallel:
            continue
        if field.endswith("num_key_value_heads"):
            if (n % tp if tp <= n else tp % n) != 0:
                bad.append(f"{field} = {n} (neither divisible by {tp} nor dividing it)")
        elif n % tp:
            bad.append(f"{field} = {n}")
    return bad


def check_heads(model_dir: Path, tp: int, server_args: list[str], where: str = "") -> None:
    cfg_path = Path(model_dir) / "config.json"
    if not cfg_path.exists():
        raise InputError(f"{where}: tensor_parallel_size {tp}: {cfg_path} not found, so its heads cannot be checked "
                         "(the study's 'model' must be a model folder)")
    try:
        config = load_json(cfg_path, "model config")  # a downloaded model's file: under the loader's limits
    except DataError as e:
        raise DataError(f"{where}: tensor_parallel_size {tp}: {e}") from None
    data_parallel_encoder = _flag_value(server_args, "--mm-encoder-tp-mode") == "data"
    bad = tp_problems(head_counts(config), tp, data_parallel_encoder)
    if bad:
        fits = [t for t in range(1, 9) if not tp_problems(head_counts(config), t, data_parallel_encoder)]
        raise InputError(f"{where}: tensor_parallel_size {tp} does not divide the heads of {cfg_path}: "
                         f"{'; '.join(bad)}; vLLM shards each over the TP ranks. Sizes that fit: "
                         f"{', '.join(map(str, fits))}")

