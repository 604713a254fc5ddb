"""Model-folder checks every stage that loads a checkpoint shares: safetensors only, no pickle files,
no remote code, and a chat template that renders in bounded time and memory."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from quantgate.errors import InputError, UnsafeInputError

# Weight files torch reads with pickle. Only the folder's top level is looked at: that is all
# transformers, `transformers serve` and vLLM read (subfolders such as Meta's ``original/`` are not).
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
# A normal chat template renders a one-page conversation in milliseconds; this bounds a hostile one
# (nested range() loops), with a wide margin for a loaded machine.
TEMPLATE_RENDER_LIMIT_S = 10.0
TEMPLATE_MEMORY_LIMIT_BYTES = 1 << 30


def pickle_files(path: Path) -> list[str]:
    return sorted(f.name for f in Path(path).iterdir() if f.suffix.lower() in PICKLE_SUFFIXES and f.is_file())


def check_model_dir(path: Path, trust_remote_code: bool = False, *, allow_pickle_files: bool = False,
                    chat_template: bool = True) -> list[str]:
    """Refuse what is not a safetensors model folder before any server spends minutes on it.

    Pickle weight files are refused even next to safetensors ones (an empty decoy ``x.safetensors``
    must not let a loader fall back to ``pytorch_model.bin``); ``allow_pickle_files`` only means
    "ignore them" — quantgate itself loads with ``use_safetensors=True``. With ``chat_template``
    the folder's templates are rendered once under a time limit (:func:`check_chat_template`).
    Returns warnings."""
    path = Path(path)
    if not (path / "config.json").is_file():
        raise InputError(f"{path}: not a model folder (no config.json)")
    pickles = pickle_files(path)
    if not any(path.glob("*.safetensors")):
        if pickles:
            raise UnsafeInputError(f"{path}: only pickle weights ({', '.join(pickles[:3])}); quantgate loads "
                                   "safetensors only — convert them first (e.g. save_pretrained(safe_serialization=True))")
        raise InputError(f"{path}: no *.safetensors weights")
    if pickles and not allow_pickle_files:
        raise UnsafeInputError(f"{path}: holds pickle files ({', '.join(pickles[:3])}) next to its safetensors; loaders "
                               "can fall back to them and unpickling runs code. Delete or move them out, or (plan, "
                               "quantize) pass --allow-pickle-files to ignore them: quantgate loads safetensors only. "
                               "A server's own loader could fall back to them, so serve always refuses them")
    from quantgate.schema.load import load_json

    cfg = load_json(path / "config.json")  # a downloaded model's file: under the loader's limits
    if isinstance(cfg, dict) and "auto_map" in cfg and not trust_remote_code:
        raise UnsafeInputError(f"{path / 'config.json'}: has 'auto_map' (custom code); refusing to run it — "
                               "pass --trust-remote-code if you have reviewed that code")
    return check_chat_template(path) if chat_template else []


# --- chat templates ---------------------------------------------------------------------------

def _json_file(f: Path) -> dict:
    from quantgate.schema.load import load_json

    obj = load_json(f)  # a downloaded model's file: under the loader's limits
    return obj if isinstance(obj, dict) else {}


def chat_templates(path: Path) -> list[tuple[str, str]]:
    """Every chat template a loader may pick up from the folder, as (where, template text): the
    places transformers' processor and tokenizer read, and that vLLM reads through them."""
    path = Path(path)
    found: list[tuple[str, str]] = []

    def add(where: str, value, f: Path) -> None:
        if value is None:
            return
        if isinstance(value, str):
            found.append((where, value))
        elif isinstance(value, list):  # tokenizer_config: [{"name": ..., "template": ...}]
            for i, item in enumerate(value):
                if not (isinstance(item, dict) and isinstance(item.get("template"), str)):
                    raise InputError(f"{f}: chat_template[{i}] must be {{'name': ..., 'template': '...'}}")
                found.append((f"{where} ({item.get('name', i)})", item["template"]))
        else:
            raise InputError(f"{f}: 'chat_template' must be a string, got {type(value).__name__}")

    jinja = [path / "chat_template.jinja"] + sorted((path / "additional_chat_templates").glob("*.jinja"))
    for f in jinja:
        if f.is_file():
            try:
                found.append((str(f), f.read_text("utf-8")))
            except UnicodeDecodeError as e:
                raise InputError(f"{f}: chat template is not UTF-8 (byte {e.start})") from None
    for name in ("chat_template.json", "tokenizer_config.json", "processor_config.json"):
        f = path / name
        if f.is_file():
            add(f"{f} field 'chat_template'", _json_file(f).get("chat_template"), f)
    return found


def _special_tokens(path: Path) -> dict[str, str]:
    """bos/eos/... as the processor passes them to the template (templates concatenate them)."""
    out: dict[str, str] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        f = path / name
        if not f.is_file():
            continue
        for k, v in _json_file(f).items():
            if k.endswith("_token") and k not in out:
                v = v.get("content") if isinstance(v, dict) else v
                if isinstance(v, str):
                    out[k] = v
    return out


def _sample_conversations() -> list[list[dict]]:
    """The conversations quantgate itself renders: a page image and the prompt (serving and
    calibration), and the text-only calibration form with the expected answer."""
    from quantgate.schema.run import DEFAULT_PROMPT

    return [[{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": DEFAULT_PROMPT}]}],
            [{"role": "user", "content": [{"type": "text", "text": DEFAULT_PROMPT}]},
             {"role": "assistant", "content": [{"type": "text", "text": "# Title\n\nA paragraph."}]}]]


_CHECKED: set[str] = set()


def check_chat_template(path: Path, limit_s: float | None = None) -> list[str]:
    """Render each of the folder's chat templates once, with transformers' own sandboxed renderer,
    in a child process under a time and memory limit. A template that does not finish (a loop of
    ``range(100000)`` in a ``range(100000)``) or runs out of memory, or does not parse, is refused
    naming its file; one that raises on quantgate's sample conversation is returned as a warning
    (the real render, with the processor's arguments, decides). Memoised per process on the text."""
    import hashlib
    import selectors
    import subprocess

    path = Path(path)
    limit_s = TEMPLATE_RENDER_LIMIT_S if limit_s is None else limit_s
    templates = chat_templates(path)
    payload = {"templates": [t for _, t in templates], "conversations": _sample_conversations(),
               "kwargs": _special_tokens(path), "memory_limit": TEMPLATE_MEMORY_LIMIT_BYTES}
    key = hashlib.sha256(json.dumps([payload, limit_s], sort_keys=True).encode()).hexdigest()
    if not templates or key in _CHECKED:
        return []
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                        os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "quantgate.io.modeldir"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        # Importing transformers is not part of the limit: wait for the child to say it is ready.
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout=300) and proc.stdout.readline() == b"ready\n"
        sel.close()
        if not ready:
            proc.kill()
            _, err = proc.communicate()
            raise InputError(f"{path}: could not start the chat-template check ({err.decode(errors='replace')[-500:]})")
        try:
            out, err = proc.communicate(json.dumps(payload).encode(), timeout=limit_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            timed_out = True
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    results = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    done = {r["i"]: r for r in results if "error" in r}
    warnings = []
    for i, (where, _) in enumerate(templates):
        r = done.get(i)
        if r is None:
            why = (f"did not finish rendering a one-page conversation within {limit_s:g} s" if timed_out
                   else f"stopped the renderer (exit code {proc.returncode}: out of memory?)")
            raise UnsafeInputError(f"{where}: chat template {why}; refusing a template that loops or grows "
                                   "without bound — fix or remove it")
        if r["kind"] == "memory":
            raise UnsafeInputError(f"{where}: chat template used more than {TEMPLATE_MEMORY_LIMIT_BYTES >> 20} MiB "
                                   "rendering a one-page conversation; fix or remove it")
        if r["kind"] == "syntax":
            raise InputError(f"{where}: chat template does not parse ({r['error']}); fix it")
        if r["kind"] == "render":
            warnings.append(f"{where}: chat template raised on quantgate's sample conversation ({r['error']})")
    _CHECKED.add(key)
    return warnings


def _render_child() -> None:
    """Child side of :func:`check_chat_template`: import, say ready, cap memory, render, report."""
    import resource

    import jinja2
    from transformers.utils.chat_template_utils import render_jinja_template

    sys.stdout.write("ready\n")
    sys.stdout.flush()
    payload = json.loads(sys.stdin.read())
    try:
        vm = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (vm + payload["memory_limit"],) * 2)
    except (OSError, ValueError):
        pass  # no /proc or no RLIMIT_AS: the time limit still holds
    for i, template in enumerate(payload["templates"]):
        kind = error = None
        try:
            for conv in payload["conversations"]:
                render_jinja_template([conv], chat_template=template, add_generation_prompt=True, **payload["kwargs"])
        except MemoryError:
            kind, error = "memory", "MemoryError"
        except jinja2.TemplateSyntaxError as e:
            kind, error = "syntax", f"line {e.lineno}: {e.message}"
        except Exception as e:  # noqa: BLE001 — any other failure is the template's, reported as a warning
            kind, error = "render", f"{type(e).__name__}: {e}"[:300]
        sys.stdout.write(json.dumps({"i": i, "kind": kind, "error": error}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _render_child()
