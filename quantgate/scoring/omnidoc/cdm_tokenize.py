r"""CDM's tokenizer (OmniDocBench v1.5 runs im2markup's ``preprocess_formula.js normalize`` on a fork of KaTeX 0.6,
``metrics/cdm/modules/tokenize_latex`` at 523fd1d), re-implemented in Python from reading it: a formula in, its
tokens out, one space apart, in a normal form (``x_i`` → ``x _ { i }``, ``\sin`` → ``\operatorname { s i n }``,
``\over`` → ``\frac``), or None where upstream's tokenizer fails (its caller then uses the formula as written).

Why a port and not KaTeX itself: the fork is lenient where every KaTeX since is strict — a command it does not know
is read as a symbol, a function given too weak an argument or a double superscript passes, ``\color`` and
``\KaTeX`` make the whole formula fail — and CDM's tokens are what it emits, so only its own grammar gives
upstream's tokens. What it does, step by step: the line clean-up (``%`` comments, ``$``, ``\label{…}``, ``\\`` as
``\,`` outside environments, ``{\rm`` as ``\mathrm{``); a lexer of single code points, ``\name`` and ``\x``; a parser
of atoms with sub/superscripts, implicit groups (``\left…\right``, ``\begin…\end``, ``\bf``-like sizes and
``\displaystyle``-like styles running to the group's end), functions with their argument counts and greediness, and
the environments array, tabular, matrix and its delimited forms, cases, picture, aligned; and the printer.

One table is data taken from the fork: which backslash commands it knows as symbols other than ordinary letters
(:data:`.cdm_grammar.NOT_LETTERS`), because inside ``\mathrm{…}`` it spells a letter-like command out character by
character."""

from __future__ import annotations

import re

from quantgate.scoring.omnidoc.cdm_grammar import Fails, Node
from quantgate.scoring.omnidoc.cdm_parse import Parser


class _Printer:
    """The fork's tree-to-LaTeX printer: every token followed by one space, groups in '{ … }'."""

    def __init__(self) -> None:
        self.out = ""

    def many(self, nodes: list, font: str | None) -> None:
        for node in nodes:
            self.one(node, font)

    def one(self, node: Node | None, font: str | None) -> None:  # noqa: C901 -- one branch per node type
        if node is None:
            raise Fails("missing argument")
        t, v = node.type, node.value
        if t == "mathord" and font == "mathrm":
            self.out += "".join(c + "\\; " if c == " " else c + " " for c in v)
        elif t in ("mathord", "textord"):
            self.out += v + " "
        elif t == "spacing":
            self.out += "~ " if v == " " else v + " "
        elif t == "ordgroup":
            self.out += "{ "
            self.many(v, font)
            self.out += "} "
        elif t == "text":
            self.out += "\\mathrm { "
            self.many(v["body"], font)
            self.out += "} "
        elif t == "supsub":
            self.one(v["base"], font)
            for key, mark in (("sub", "_"), ("sup", "^")):
                if v[key] is not None:
                    self._script(mark, v[key], font)
        elif t == "genfrac":
            self.out += "\\frac " if v["bar"] else "\\binom "
            self.one(v["numer"], font)
            self.one(v["denom"], font)
        elif t == "array":
            self._array(v, font)
        elif t == "sqrt":
            if v["index"] is not None:
                self.out += "\\sqrt [ "
                self.many(v["index"].value, font)
                self.out += "] "
            else:
                self.out += "\\sqrt "
            self.one(v["body"], font)
        elif t == "leftright":
            self.out += f"\\left{v['left']} "
            self.many(v["body"], font)
            self.out += f"\\right{v['right']} "
        elif t == "accent":
            if v["base"] is None:
                raise Fails("missing argument")
            if v["base"].type != "ordgroup":
                self.out += v["accent"] + " { "
                self.one(v["base"], font)
                self.out += "} "
            else:
                self.out += v["accent"] + " "
                self.one(v["base"], font)
        elif t == "op":
            if v["symbol"]:
                self.out += v["body"] + " "
            else:
                self.out += ("\\operatorname* { " if v["limits"] else "\\operatorname { ") + \
                    "".join(c + " " for c in v["body"][1:]) + "} "
        elif t == "font":
            name = "mathrm" if v["font"] in ("mbox", "hbox") else v["font"]
            self.out += f"\\{name} "
            self.one(v["body"], name)
        elif t == "delimsizing":
            self.out += f"{v['funcName']} {v['value']} "
        elif t == "styling":
            self.out += f" {v['original']} "
            self.many(v["value"], font)
        elif t == "sizing":
            if v["original"] == "\\rm":
                self.out += "\\mathrm { "
                self.many(v["value"], "mathrm")
                self.out += "} "
            else:
                self.out += f" {v['original']} "
                self.many(v["value"], font)
        elif t in ("overline", "underline"):
            self.out += f"\\{t} {{ "
            self.one(v["body"], font)
            self.out += "} "
        elif t == "rule":
            (w, wu), (h, hu) = v["width"], v["height"]
            self.out += f"\\rule {{ {_js_number(w)} {wu}  }} {{ {_js_number(h)} {hu} }} "
        elif t in ("llap", "rlap"):
            self.out += f"\\{t} "
            self.one(v["body"], font)
        elif t == "phantom":
            self.out += "\\phantom { "
            self.many(v["value"], font)
            self.out += "} "
        else:
            # color and \KaTeX build MathML nodes the script never imports; cr, infix, environment and the
            # argument kinds have no printer: each throws there, and the whole formula fails
            raise Fails(f"no printer for {t}")

    def _script(self, mark: str, node: Node, font: str | None) -> None:
        self.out += mark + " "
        if node.type != "ordgroup":
            self.out += " { "
            self.one(node, font)
            self.out += "} "
        else:
            self.one(node, font)

    def _array(self, v: dict, font: str | None) -> None:
        self.out += "\\begin{array} { "
        if v["cols"] is not None:
            self.out += "".join(c["align"] + " " for c in v["cols"] if c and c["align"])
        else:
            self.out += "l " * len(v["body"][0])
        self.out += "} "
        for row in v["body"]:
            if any(len(cell.value) > 0 for cell in row):
                for cell in row:
                    self.one(cell, font)
                    if len(self.out) > 4 and self.out.endswith("{ } "):
                        self.out = self.out[:-4]
                    self.out += "& "
                self.out = self.out[:-2] + "\\\\ "
        self.out += "\\end{array} "


def _js_number(x: float) -> str:
    return str(int(x)) if x == int(x) else repr(x)


def _first(pattern: str, repl: str, text: str, times: int = 300) -> str:
    """The script's ``line.replace(/pattern/, repl)`` done ``times`` times: the first match each time."""
    rx = re.compile(pattern)
    for _ in range(times):
        text = rx.sub(lambda m: repl, text, count=1)
    return text


def _clean(line: str) -> str:
    """The script's clean-up of one line before parsing."""
    if line[:1] == "%":
        line = line[1:]
    line = line.split("%")[0].replace("\\~", " ")
    for _ in range(300):
        line = re.sub(r"\\>", " ", line, count=1)
        line = line.replace("$", " ", 1)
        line = re.sub(r"\\label{.*?}", "", line, count=1)
    if not any(w in line for w in ("matrix", "cases", "array", "begin")):
        line = _first(r"\\\\", "\\,", line)
    line += " "
    for _ in range(300):
        for pattern in (r"{\\rm", r"{ \\rm", r"\\rm{"):
            line = re.sub(pattern, lambda m: "\\mathrm{", line, count=1)
    return line


def normalize_line(line: str) -> str | None:
    """One line as the script prints it (None where it prints an empty line: the parse or the print failed)."""
    try:
        tree = Parser(_clean(line)).parse()
        printer = _Printer()
        printer.many(tree, None)
    except (Fails, RecursionError):
        return None
    out = printer.out
    for _ in range(300):
        out = out.replace("SSSSSS", "$", 1).replace(" S S S S S S", "$", 1)
    return re.sub(r"\\label { .*? }", "", out, count=1)


def tokenize(latex: str) -> str:
    """What upstream's tokenizer returns for a formula (as :func:`~quantgate.scoring.omnidoc.cdm_latex.
    before_tokenizer` prepared it): the last line's normalised tokens, or '' where that line failed."""
    lines = [x for x in re.split(r"\r\n|\r|\n", latex)]
    if lines and lines[-1] == "":
        lines.pop()
    return (normalize_line(lines[-1]) or "") if lines else ""
