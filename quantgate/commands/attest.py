"""``quantgate verify``: check a signed verdict offline; ``quantgate keygen``: an Ed25519 key pair to sign with."""

from __future__ import annotations

import argparse
from pathlib import Path

from quantgate.commands._args import existing_path


def register(sub) -> None:
    v = sub.add_parser("verify", help="check a signed verdict (gate --sign) offline",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="""\
Check ATTESTATION (written by `quantgate gate --sign KEY`) with the public key: the DSSE signature over
the in-toto statement; with --study DIR also that DIR/summary.json is the signed one, that every variant
folder holds exactly the signed files (the subjects' digests), and that every file summary.json binds by
hash (scores, pages) still has it. It prints the signed scope: the variants and metrics the gate checked
(a signature covers nothing else). Exit code: the signed gate outcome (0 PASS, 1 FAIL, 2 UNDECIDED) when
everything checks out — with --variant, that variant's own outcome —; 3 with one line when anything does
not. docs/security.md says what it promises.""")
    v.add_argument("attestation", type=existing_path, help="the attestation `gate --sign` wrote")
    v.add_argument("--key", required=True, type=existing_path, metavar="PUB", help="the signer's Ed25519 public key (PEM)")
    v.add_argument("--study", type=existing_path, metavar="DIR", help="the study folder to check against the statement")
    v.add_argument("--variant", action="append", metavar="NAME", help="require that the signed gate checked NAME and "
                   "that it passed: exit 3 if the signature does not cover it, else NAME's own signed outcome (0, 1, "
                   "2; the worst of several). Repeatable. A deploy pipeline names the variant it deploys")
    v.set_defaults(func=cmd_verify)

    k = sub.add_parser("keygen", help="make an Ed25519 key pair for gate --sign",
                       description="Write KEY (Ed25519 private key, PKCS#8 PEM, readable by you only, unencrypted: keep "
                       "it in your CI's secret store) and KEY.pub (the public key verifiers get). Never overwrites. "
                       "The same with openssl: `openssl genpkey -algorithm ed25519 -out KEY && openssl pkey -in KEY "
                       "-pubout -out KEY.pub`.")
    k.add_argument("-o", "--output", required=True, type=Path, metavar="KEY", help="private key file to write "
                   "(PEM; the public key beside it)")
    k.set_defaults(func=cmd_keygen)


def cmd_verify(a: argparse.Namespace) -> int:
    from quantgate.gate.attest import verify

    code, lines = verify(a.attestation, a.key, a.study, a.variant)
    for line in lines:
        print(line)
    return code


def cmd_keygen(a: argparse.Namespace) -> int:
    from quantgate.gate.attest import keygen

    priv, pub = keygen(a.output)
    print(f"private key: {priv} (keep it secret: only the job that runs the study signs)")
    print(f"public key: {pub}")
    return 0
