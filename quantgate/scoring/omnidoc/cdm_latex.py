"""CDM's LaTeX side (OmniDocBench v1.5's ``metrics/cdm/modules/latex_processor.py``, ``latex2bbox_color.py`` and
``tokenize_latex.py`` at 523fd1d, re-implemented from reading them): a formula, once its tokenizer has spaced its
tokens, becomes a LaTeX document in which every visible token has a colour of its own, so the renderer can find
each token's box by its colour.

Why each step (upstream's reasons, kept for parity):

* :func:`normalize` glues what must render as one token (``\\big(``, ``\\not=``, ``\\hspace{1cm}``), spells out
  ``\\sin``-like operators letter by letter and ``\\dots`` as three dots (so they match however they were written),
  drops colours the formula had, and gives ``\\hat``, ``\\sqrt``, ``\\frac``-like commands the braces they may
  lack, so each argument is one group.
* :func:`colour` walks the tokens: a plain token gets ``\\mathcolor[RGB]{r,g,b}{…}``; an accent or a fraction is
  coloured as one token around its arguments; ``\\text``-like wrappers colour what they wrap, not themselves;
  braces, ``^``, ``_``, ``\\left``/``\\right``, spacing and rules are not tokens.
* Upstream's index arithmetic is kept as it is, stale bounds included, because which token gets which colour is
  what the match compares: a formula upstream cannot colour (an unclosed brace, a command missing its argument)
  raises here too (ValueError, IndexError, or RecursionError where a nested walk re-enters its own command), and
  the caller scores it as upstream does (0).

The tokenizer (im2markup's KaTeX normaliser) runs in node: :func:`before_tokenizer` and :func:`after_tokenizer` are
the steps upstream wraps around it."""

from __future__ import annotations

import re

# which commands take which arguments, as upstream classifies them
SKIP_PATTERNS = (r"\{", r"\}", r"[\[\]]", r"\\begin\{.*?\}", r"\\end\{.*?\}", r"\^", r"\_", r"\\.*rule.*",
                 r"\\.*line.*", r"\[[\-.0-9]+[epm][xtm]\]")
SKIP = ("\\", "\\\\", "\\index", "\\a", "&", "$", "\\multirow", "\\def", "\\raggedright", "\\url", "\\cr",
        "\\ensuremath", "\\left", "\\right", "\\mathchoice", "\\scriptstyle", "\\displaystyle", "\\qquad", "\\quad",
        "\\,", "\\!", "~", "\\boldmath")
PHANTOM = ("\\fontfamily", "\\vphantom", "\\phantom", "\\rowcolor", "\\ref")
TWO_ARGS = ("\\frac", "\\binom")
OPTIONAL_THEN_ARG = ("\\xrightarrow", "\\xleftarrow", "\\sqrt")
TWO_ARGS_UNSEEN = ("\\overset", "\\underset", "\\stackrel")
ONE_ARG = ("\\widetilde", "\\overline", "\\hat", "\\widehat", "\\tilde", "\\Tilde", "\\dot", "\\bar", "\\vec",
           "\\underline", "\\underbrace", "\\check", "\\breve", "\\Bar", "\\Vec", "\\mathring", "\\ddot")
ONE_ARG_UNSEEN = ("\\boldsymbol", "\\pmb", "\\textbf", "\\mathrm", "\\mathbf", "\\mathbb", "\\mathcal", "\\textmd",
                  "\\texttt", "\\textnormal", "\\text", "\\textit", "\\textup", "\\mathop", "\\mathbin", "\\smash",
                  "\\operatorname", "\\textrm", "\\mathfrak", "\\emph", "\\textsf", "\\textsc")
_ONE = ONE_ARG + ONE_ARG_UNSEEN

# operators the tokenizer writes as \operatorname {s i n}: put back as \sin. Upstream joins the names' characters
# (the '|' too) with optional spaces; the same pattern is built here so the same spellings match
_OPERATORS = ("arccos", "arcsin", "arctan", "arg", "cos", "cosh", "cot", "coth", "csc", "deg", "det", "dim", "exp",
              "gcd", "hom", "inf", "injlim", "ker", "lg", "lim", "liminf", "limsup", "ln", "log", "max", "min", "Pr",
              "projlim", "sec", "sin", "sinh", "sup", "tan", "tanh")
_OPERATOR_NAME = re.compile(r"\\operatorname {(" + r"\s?".join("|".join(_OPERATORS)) + ")}")
PERCENT = "<PERCENTAGETOKEN>"

TEMPLATE = r"""
\documentclass[12pt]{article}
\usepackage[landscape]{geometry}
\usepackage{geometry}
\geometry{a<PAPER>paper,scale=0.98}
\pagestyle{empty}
\usepackage{amsmath}
\usepackage{upgreek}
\usepackage{amssymb}
\usepackage{xcolor}
\usepackage{xeCJK}
\setCJKmainfont{<CJK>}
\setCJKsansfont{<CJK>}
\setCJKmonofont{<CJK>}
\xeCJKsetup{CJKmath=true}
\begin{document}
\makeatletter
\renewcommand*{\@textcolor}[3]{%
  \protect\leavevmode
  \begingroup
    \color#1{#2}#3%
  \endgroup
}
\makeatother
\begin{displaymath}
<FORMULA>
\end{displaymath}
\end{document}
"""


class NeverEnds(ValueError):
    """Upstream's walk would return to a token it passed and loop forever (a command whose argument has no closing
    brace anywhere after it, e.g. ``\\multicolumn x``); quantgate stops and the formula fails instead."""


def closing(seq: list[str], start: int, pair: tuple[str, str] = ("{", "}")) -> int:
    """Index of the bracket closing the one at ``start``; -1 when ``seq[start]`` opens none and none is left open;
    ValueError when one stays open."""
    depth = 0
    for i in range(start, len(seq)):
        if seq[i] == pair[0]:
            depth += 1
        elif seq[i] == pair[1]:
            depth -= 1
            if depth == 0:
                return i
    if depth > 0:
        raise ValueError(f"no {pair[1]!r} closes the {pair[0]!r} at token {start}")
    return -1


def _glue(text: str, pattern: str, new=lambda found: found.replace(" ", "")) -> str:
    """Every text ``pattern`` finds, replaced (each everywhere, in the order found) by ``new(found)``."""
    for found in re.findall(pattern, text, re.DOTALL):
        text = text.replace(found, new(found))
    return text


def _glued_then_space(found: str) -> str:
    return found.replace(" ", "") + " "


def _tabular(text: str) -> str:
    """The table-only steps: \\begin{tabular}'s column spec and \\cmidrule/\\cline ranges as one token."""
    for env in ("tabular", "array"):
        text = text.replace(f"\\begin {{{env}}}", f"\\begin{{{env}}}").replace(f"\\end {{{env}}}", f"\\end{{{env}}}")
    seq = text.split(" ")
    for idx, tok in enumerate(seq):
        if tok == "\\begin{tabular}":
            end = closing(seq, idx + 1)
            seq = [*seq[:idx], "".join(seq[idx:end + 1]), *seq[end + 1:]]
            break
    idx = 0
    while idx < len(seq):
        if seq[idx] in ("\\cmidrule", "\\cline"):
            if seq[idx + 1] == "(":
                end = closing(seq, closing(seq, idx + 1, ("(", ")")) + 1)
            else:
                end = closing(seq, idx + 1)
            seq = [*seq[:idx], "".join(seq[idx:end + 1]), *seq[end + 1:]]
        idx += 1
    return " ".join(seq)


def normalize(text: str) -> str:
    """Upstream's ``normalize_latex`` of tokenized LaTeX (tokens separated by single spaces)."""
    table = "tabular" in text
    text = text.strip().replace(r"\pmatrix", r"\mypmatrix").replace(r"\matrix", r"\mymatrix")
    for gone in ("\\raggedright", "\\arraybackslash", "\\lowercase", "\\uppercase"):
        text = text.replace(gone, "")
    text = _glue(text, r"\\[hv]space { [.0-9a-z ]+ }", (lambda f: "") if table else (lambda f: f.replace(" ", "")))
    if table:
        text = _tabular(text)
    text = _glue(text, r"\\begin{array} { [lrc ]+ }",
                 lambda f: "\\begin{array} " + f[len("\\begin{array} "):].replace(" ", ""))
    text = _glue(text, r"\\not [<>+=\-]")
    text = f" {text} "
    for dots in ("\\ldots", "\\cdots", "\\dots", "\\dotsb"):
        text = text.replace(f" {dots} ", " . . . ")
    for op in ("log", "exp", "sin", "cos", "tan", "tanh", "cosh", "sinh"):
        text = text.replace(f" \\{op} ", " \\mathrm { " + " ".join(op) + " } ")
    text = _glue(text, r"\\[Bb]ig[g]?[glrm]? [(){}|\[\]] ", _glued_then_space)
    text = _glue(text, r"\\[Bb]ig[g]?[glrm]? \\.*? ", _glued_then_space)
    text = _glue(text, r"\\operatorname \*", lambda f: "\\operatorname")
    text = text.replace("\\lefteqn", "").replace("\\footnote ", "^ ")
    text = _glue(text, r"\\\' [^{] ", _glued_then_space)
    if table:
        text = _glue(text, r"\[ [\-.0-9 ]+[exptcm ]+ \]")
    text = _glue(text, r"\\parbox {[^{]+}")
    text = _glue(text, r"\\raisebox {[^{]+} [\[\]0-9 exptcm]+{", lambda f: f.replace(" ", "")[:-1] + " {")
    text = _glue(text, r"{ \\char[0-9\' ]+}", lambda f: "{ " + f.replace(" ", "")[1:-1] + " }")
    text = _glue(text, r"\\not [\\=\<\>][^ ]+ ", _glued_then_space)
    text = _glue(text, r"\\specialrule {[ .0-9a-z]+} {[ .0-9a-z]+} {[ .0-9a-z]+}")
    colours = (r"\\colorbox[ \[\]RGBrgb]+{ [A-Za-z 0-9,!]+ } |\\color[ \[\]RGBrgb]+{ [A-Za-z 0-9,!]+ } "
               r"|\\textcolor[ \[\]RGBrgb]+{ [A-Za-z 0-9,!]+ } |\\cellcolor[ \[\]RGBrgb]+{ [A-Za-z 0-9,!]+ } ")
    text = _glue(text, colours, lambda f: "")
    return " ".join(_braced(text.split(" ")))


def _braced(seq: list[str]) -> list[str]:
    """Arguments given without braces get them: ``\\hat x`` → ``\\hat { x }``, ``\\frac 1 2`` → ``\\frac { 1 } { 2 }``."""
    idx = 0
    while idx < len(seq):
        tok = seq[idx]
        if tok in _ONE:
            last = idx + 1  # a run of one-argument commands shares one argument, each wrapping the next
            while last < len(seq) and seq[last] in _ONE:
                last += 1
            opened = [x for t in seq[idx:last] for x in (t, "{")]
            closers = ["}"] * (last - idx)
            if seq[last] != "{":
                seq = [*seq[:idx], *opened, seq[last], *closers, *seq[last + 1:]]
            else:
                end = closing(seq, last)
                seq = [*seq[:idx], *opened, *seq[last + 1:end], *closers, *seq[end + 1:]]
        elif tok in OPTIONAL_THEN_ARG:
            if seq[idx + 1] not in ("[", "{"):
                seq = [*seq[:idx + 1], "{", seq[idx + 1], "}", *seq[idx + 2:]]
            else:
                end = closing(seq, idx + 1, ("[", "]")) if seq[idx + 1] == "[" else idx
                if seq[end + 1] != "{":
                    seq = [*seq[:end + 1], "{", seq[end + 1], "}", *seq[end + 2:]]
        elif tok in TWO_ARGS + TWO_ARGS_UNSEEN:
            if seq[idx + 1] != "{":
                seq = [*seq[:idx + 1], "{", seq[idx + 1], "}", *seq[idx + 2:]]
            end = closing(seq, idx + 1)
            if seq[end + 1] != "{":
                seq = [*seq[:end + 1], "{", seq[end + 1], "}", *seq[end + 2:]]
        idx += 1
    return seq


class _Colouring:
    """One pass of upstream's ``token_add_color_RGB`` over a normalized formula: ``seq`` gains the colour commands
    (``<color_N>`` placeholders), ``tokens`` the N-th coloured token."""

    def __init__(self, seq: list[str]) -> None:
        self.seq, self.tokens = seq, []

    def _mark(self, token: str) -> str:
        self.tokens.append(token)
        return f"\\mathcolor[RGB]{{<color_{len(self.tokens) - 1}>}}{{"

    def _wrap(self, idx: int, end: int, head: str = "") -> None:
        """``seq[idx]`` coloured together with its arguments up to ``seq[end]``."""
        s = self.seq
        self.seq = [*s[:idx], head + self._mark(s[idx]) + s[idx], *s[idx + 1:end + 1], "}" * (1 + len(head)),
                    *s[end + 1:]]

    def _inside(self, start: int, end: int, braces: bool = False) -> None:
        # ``end`` is not moved as colouring lengthens the list: upstream's bound, kept
        while start < end:
            start = self._advance(start, braces)

    def _advance(self, idx: int, braces: bool = False) -> int:
        after = self.step(idx, braces)
        if after <= idx:
            raise NeverEnds(f"colouring returns from token {idx} ({self.seq[idx]!r}) to token {after}")
        return after

    def step(self, idx: int, braces: bool = False) -> int:
        s, tok = self.seq, self.seq[idx]
        if not tok:
            return idx + 1
        if tok in PHANTOM:
            return (closing(s, idx + 1) if s[idx + 1] == "{" else idx + 1) + 1
        if tok in TWO_ARGS:
            end = closing(s, closing(s, idx + 1) + 1)
            self._wrap(idx, end)
            return idx + 1
        if tok in ONE_ARG:
            end = closing(s, idx + 1)
            lower = tok != "\\underbrace" and end + 1 < len(s) and s[end + 1] == "_"
            self._wrap(idx, end, "{" if lower else "")
            return idx + 1
        if tok in ONE_ARG_UNSEEN:
            end = closing(s, idx + 1)
            if end - (idx + 1) == 2:
                inner = s[idx + 2]
                self.seq = [*s[:idx + 2], self._mark(inner) + inner + "}", *s[end:]]
            else:
                self._inside(idx + 2, end)
            return end + 1
        if tok in OPTIONAL_THEN_ARG:
            return self._optional_then_arg(idx)
        if tok in ("\\multicolumn", "\\multirow"):
            first = closing(s, idx + 1)
            second = closing(s, first + 1)
            third = closing(s, second + 1)
            self._inside(second + 2, third)
            return third + 1
        if tok in SKIP + TWO_ARGS_UNSEEN or any(re.match(p, tok) for p in SKIP_PATTERNS):
            if (tok == "[" and s[idx - 1] != "\\sqrt") or (tok == "]" and idx >= 3 and s[idx - 3] != "\\sqrt"):
                self.seq = [*s[:idx], self._mark(tok) + tok + "}", *s[idx + 1:]]
            return idx + 1
        if braces or (idx > 1 and s[idx - 1] == "_"):
            self.seq = [*s[:idx], "{" + self._mark(tok) + tok + "}}", *s[idx + 1:]]
        else:
            self.seq = [*s[:idx], self._mark(tok) + tok + "}", *s[idx + 1:]]
        return idx + 1

    def _optional_then_arg(self, idx: int) -> int:
        s = self.seq
        if s[idx + 1] == "{":
            end = closing(s, idx + 1)
            self._wrap(idx, end)
            self._inside(idx + 2, end)
            return end + 1
        if s[idx + 1] == "[":
            opt_end = closing(s, idx + 1, ("[", "]"))
            end = closing(s, opt_end + 1)
            self._wrap(idx, end)
            self._inside(idx + 2, opt_end, braces=True)
            self._inside(opt_end + 2, end)
            return end + 1
        # upstream fails here too (its next index is never set)
        raise ValueError(f"{s[idx]} at token {idx} has no argument")


def colour(normalized: str) -> tuple[str, list[str]]:
    """The formula with ``<color_N>`` placeholders, and its coloured tokens in order."""
    c = _Colouring(normalized.strip().split(" "))
    idx = 0
    while idx < len(c.seq):
        idx = c._advance(idx)
    return " ".join(c.seq), c.tokens


def colours(n: int = 5800, gap: int = 15) -> list[tuple[int, int, int]]:
    """The token colours: an RGB grid of step ``gap``, black left out (black is not a token)."""
    side = 255 // gap + 1
    return [(k // side**2 * gap, k % side**2 // side * gap, k % side * gap) for k in range(1, min(n + 1, side**3))]


def document(normalized: str, cjk_font: str) -> tuple[str, list[str]]:
    """The XeLaTeX document of a normalized formula, every token in its colour, and the tokens in colour order."""
    placed, tokens = colour(normalized)
    for k, (r, g, b) in enumerate(colours()[:len(normalized.strip().split(" "))]):
        placed = placed.replace(f"<color_{k}>", f"{r},{g},{b}")
    paper = 3 if len(tokens) > 1300 else 4 if len(tokens) > 600 else 5
    return (TEMPLATE.replace("<PAPER>", str(paper)).replace("<CJK>", cjk_font).replace("<FORMULA>", placed),
            tokens)


def before_tokenizer(latex: str) -> str:
    """What the tokenizer is given: one line, ``\\%`` hidden from its comment stripping, and the environments it
    does not know (split, align, alignat, eqnarray; smallmatrix) as ones it does (aligned; matrix)."""
    latex = latex.replace("\n", " ").replace("\\%", PERCENT)
    latex = re.sub(r"\\begin{(split|align|alignedat|alignat|eqnarray)\*?}(.+?)\\end{\1\*?}",
                   r"\\begin{aligned}\2\\end{aligned}", latex, flags=re.S)
    return re.sub(r"\\begin{(smallmatrix)\*?}(.+?)\\end{\1\*?}", r"\\begin{matrix}\2\\end{matrix}", latex,
                  flags=re.S)


def after_tokenizer(tokenized: str, original: str) -> str:
    """The tokenizer's line made ready for :func:`normalize`: ``\\operatorname {s i n}`` back to ``\\sin``, and
    where the tokenizer gave nothing (it failed), the formula as it came, on one line."""
    post = " ".join(tokenized.strip().split())
    if post:
        names = ["\\" + x.replace(" ", "") for x in _OPERATOR_NAME.findall(post)]
        post = _OPERATOR_NAME.sub(lambda m: names.pop(0), post).replace(r"\\ \end{array}", r"\end{array}")
    else:
        post = original.replace("\n", " ").replace("\\%", PERCENT)
    return post.replace("< P E R C E N T A G E T O K E N >", "\\%")
