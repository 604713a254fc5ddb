"""Scaffolding for tests, benchmarks, training and the demo build — not used by any stage at run
time: ``fixtures`` builds tiny real VLM checkpoints offline; ``stub`` is an OpenAI-compatible
server that answers at once (``python -m tests.support.stub --port N``), for client-overhead
benchmarks and fault injection."""
