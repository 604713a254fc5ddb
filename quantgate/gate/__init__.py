"""The gate: re-hash a finished study folder, make every verdict again, answer with an exit code
(``check``); and the signed attestation of that answer (``attest``)."""

from quantgate.gate.check import gate

__all__ = ["gate"]
