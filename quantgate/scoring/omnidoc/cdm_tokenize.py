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
(:data:`_NOT_LETTERS`), because inside ``\mathrm{…}`` it spells a letter-like command out character by character."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# backslash commands the fork knows as symbols of a class other than "mathord" (letters): inside \mathrm{...} these
# print whole, an unknown or letter-like command (\alpha, \foo) character by character
_NOT_LETTERS = frozenset((
    "Bbbk Box Bumpeq Cap Cup Delta Diamond Doteq Downarrow Finv Game Gamma Im Join L Lambda Leftarrow "
    "Leftrightarrow Lleftarrow Longleftarrow Longleftrightarrow Longrightarrow Lsh M Omega Phi Pi Psi Re "
    "Rightarrow Rrightarrow Rsh S Sigma Subset Supset Theta Uparrow Updownarrow Upsilon Vdash Vert Vvdash Xi a "
    "aleph amalg angle approx approxeq ast asymp b backepsilon backprime backsim backsimeq backslash barwedge "
    "because beth between bigcirc bigstar bigtriangledown bigtriangleup blacklozenge blacksquare blacktriangle "
    "blacktriangledown blacktriangleleft blacktriangleright boldmathr bot bowtie boxdot boxminus boxplus "
    "boxtimes bullet bumpeq c cap cases cdot cdotp cdots centerdot checkmark circ circeq circlearrowleft "
    "circlearrowright circledR circledS circledast circledcirc circleddash clubsuit colon complement cong cup "
    "curlyeqprec curlyeqsucc curlyvee curlywedge curvearrowleft curvearrowright d dag dagger daleth "
    "dashleftarrow dashrightarrow dashv ddag ddagger ddots diagdown diagup diamond diamondsuit digamma dint div "
    "divideontimes do doteq doteqdot dotplus dots doublebarwedge doublecap doublecup downarrow downdownarrows "
    "downharpoonleft downharpoonright e eixsts ell em emptyset enspace eqcirc eqsim eqslantgtr eqslantless equiv "
    "eth f fallingdotseq flat forall frown g ge geq geqq geqslant gets gg ggg gggtr gimel gnapprox gneq gneqq "
    "gnsim gt gtrapprox gtrdot gtreqless gtreqqless gtrless gtrsim gvertneqq h hbar heartsuit hline "
    "hookleftarrow hookrightarrow hskip hslash i in infty intd intercal intf j k l lVert land langle lbrace "
    "lbrack lceil ldotp ldots le leadsto leftarrow leftarrowtail leftharpoondown leftharpoonup leftleftarrows "
    "leftrightarrow leftrightarrows leftrightharpoons leftrightsquigarrow leftthreetimes leq leqq leqslant "
    "lessapprox lessdot lesseqgtr lesseqqgtr lessgtr lesssim lfloor lgroup lhd ll llcorner lll llless lmoustache "
    "lnapprox lneq lneqq lnot lnsim longleftarrow longleftrightarrow longmapsto longrightarrow looparrowleft "
    "looparrowright lor lozenge lrcorner lt ltimes lvert lvertneqq m mapsto mathbin measuredangle mho mid mit "
    "models mp multimap n nLeftarrow nLeftrightarrow nRightarrow nVDash nVdash nabla natural nc ncong ne nearrow "
    "neg neq nexists ngeq ngeqq ngeqslant ngtr ni nleftarrow nleftrightarrow nleq nleqq nleqslant nless nmid "
    "nonumber not notin nparallel nprec npreceq nrightarrow nshortmid nshortparallel nsim nsubseteq nsubseteqq "
    "nsucc nsucceq nsupseteq nsupseteqq ntriangleleft ntrianglelefteq ntriangleright ntrianglerighteq nvDash "
    "nvdash nwarrow o odot ominus oplus oslash otimes overleftarrow overrightarrow owns parallel partial perp "
    "pii pitchfork pm prec precapprox preccurlyeq preceq precnapprox precneqq precnsim precsim prime propto "
    "qquad quad rVert rangle rbrace rbrack rceil restriction rfloor rgroup rhd rightarrow rightarrowtail "
    "rightharpoondown rightharpoonup rightleftarrows rightleftharpoons rightrightarrows rightsquigarrow "
    "rightthreetimes risingdotseq rmoustache rtimes rvert sb searrow setminus sf sharp shortmid shortparallel "
    "sim simeq slash smallfrown smallsetminus smallskip smallsmile smile sp space spadesuit sphericalangle sqcap "
    "sqcup sqsubset sqsubseteq sqsupset sqsupseteq square star subset subseteq subseteqq subsetneq subsetneqq "
    "succ succapprox succcurlyeq succeq succnapprox succneqq succnsim succsim supset supseteq supseteqq "
    "supsetneq supsetneqq surd swarrow textbf therefore thickapprox thicksim thinspace times to top triangle "
    "triangledown triangleleft trianglelefteq triangleq triangleright trianglerighteq tt twoheadleftarrow "
    "twoheadrightarrow ulcorner underbrace unitlength unlhd unrhd uparrow updownarrow upharpoonleft "
    "upharpoonright uplus upuparrows urcorner vDash varkappa varnothing varpropto varsubsetneq varsubsetneqq "
    "varsupsetneq varsupsetneqq vartriangle vartriangleleft vartriangleright vdash vdots vee veebar vert wedge "
    "widehat widetilde wp wr yen "
).split()) | {c for c in " !#$%&(),:;_{|}"}
_TEXT_SPACING = {" ", "\\ ", "~"}
_SIZES = ("\\tiny", "\\scriptsize", "\\footnotesize", "\\small", "\\normalsize", "\\large", "\\Large", "\\LARGE",
          "\\huge", "\\Huge", "\\textrm", "\\rm", "\\cal", "\\bf", "\\siptstyle", "\\boldmath", "\\it")
_STYLES = ("\\displaystyle", "\\textstyle", "\\scriptstyle", "\\scriptscriptstyle")
_END_OF_EXPRESSION = ("}", "\\end", "\\right", "&", "\\\\", "\\cr")
_DELIMITERS = frozenset(("(", ")", "[", "\\lbrack", "]", "\\rbrack", "\\{", "\\lbrace", "\\}", "\\rbrace",
                         "\\lfloor", "\\rfloor", "\\lceil", "\\rceil", "<", ">", "\\langle", "\\rangle", "\\lt",
                         "\\gt", "\\lvert", "\\rvert", "\\lVert", "\\rVert", "\\lgroup", "\\rgroup", "\\lmoustache",
                         "\\rmoustache", "/", "\\backslash", "|", "\\vert", "\\|", "\\Vert", "\\uparrow", "\\Uparrow",
                         "\\downarrow", "\\Downarrow", "\\updownarrow", "\\Updownarrow", "."))
_COLOURS = ("blue orange pink red green gray purple " + " ".join(
    f"{c}{x}" for c, xs in (("blue", "ABCDE"), ("teal", "ABCDE"), ("green", "ABCDE"), ("gold", "ABCDE"),
                            ("red", "ABCDE"), ("maroon", "ABCDE"), ("purple", "ABCDE"), ("mint", "ABC"),
                            ("gray", "ABCDEFGHI")) for x in xs) + " kaBlue kaGreen").split()
_FONT_ALIASES = {"\\Bbb": "mathbb", "\\bold": "mathbf", "\\frak": "mathfrak"}
_FONTS = ("\\mathrm", "\\mathit", "\\mathbf", "\\mathop", "\\stackrel", "\\mathbb", "\\mathcal", "\\mathfrak",
          "\\mathscr", "\\mathsf", "\\mathtt", "\\label", "\\comment", "\\hspace", "\\vspace", "\\atop", "\\fbox",
          "\\tag", "\\makebox", "\\raisebox", "\\framebox", "\\circle", "\\line", "\\put", "\\vphantom", "\\textup",
          "\\noalign", "\\Bbb", "\\bold", "\\frak")
_OPS = {**dict.fromkeys("arcsin arccos arctan arg cos cosh cot coth csc deg dim exp hom ker lg ln log sec sin sinh "
                        "tan tanh".split(), (False, False)),
        **dict.fromkeys("det gcd inf lim liminf limsup max min Pr sup".split(), (True, False)),
        **dict.fromkeys("int iint iiint oint".split(), (False, True)),
        **dict.fromkeys("coprod bigvee bigwedge biguplus bigcap bigcup intop prod sum bigotimes bigoplus bigodot "
                        "bigsqcup smallint".split(), (True, True))}  # name -> (limits, symbol)


@dataclass(frozen=True)
class _Fn:
    args: int
    optional: int = 0
    types: tuple[str, ...] = ()
    greediness: int = 1


def _functions() -> dict[str, _Fn]:
    fns = {"\\sqrt": _Fn(1, 1), "\\color": _Fn(2, 0, ("color", "original"), 3), "\\overline": _Fn(1),
           "\\underline": _Fn(1), "\\rule": _Fn(2, 1, ("size", "size", "size")), "\\KaTeX": _Fn(0),
           "\\phantom": _Fn(1), "\\llap": _Fn(1), "\\rlap": _Fn(1), "\\over": _Fn(0), "\\choose": _Fn(0),
           "\\\\": _Fn(0, 1, ("size",)), "\\cr": _Fn(0, 1, ("size",)), "\\begin": _Fn(1, 0, ("text",)),
           "\\end": _Fn(1, 0, ("text",))}
    fns |= {f"\\{n}": _Fn(1, 0, ("text",), 2) for n in ("text", "mbox", "hbox", "vbox")}
    fns |= {f"\\{n}": _Fn(1, 0, (), 3) for n in _COLOURS}
    fns |= {f"\\{n}": _Fn(0) for n in _OPS}
    fns |= {f"\\{n}": _Fn(2, 0, (), 2) for n in ("dfrac", "frac", "tfrac", "dbinom", "binom", "tbinom")}
    fns |= {f"\\{a}{b}": _Fn(1) for a in ("big", "Big", "bigg", "Bigg") for b in ("l", "r", "m", "")}
    fns |= {"\\left": _Fn(1), "\\right": _Fn(1)}
    fns |= {n: _Fn(0) for n in (*_SIZES, *_STYLES)}
    fns |= {n: _Fn(1, 0, (), 2) for n in _FONTS}
    fns |= {f"\\{n}": _Fn(1) for n in ("acute", "grave", "ddot", "tilde", "bar", "breve", "check", "hat", "vec",
                                       "dot")}
    return fns


_FN = _functions()


class Fails(Exception):
    """Where upstream's tokenizer throws (its output is then an empty line)."""


@dataclass
class _Node:
    type: str
    value: Any
    mode: str = "math"


@dataclass
class _Token:
    text: str
    end: int
    data: Any = None


_TOKEN = re.compile("([ \r\n\t]+)|(---?|[!-\\[\\]-\u2027\u202a-\ud7ff\uf900-\uffff\U00010000-\U0010ffff]"
                    "|\\\\(?:[a-zA-Z]+|[^\ud800-\udfff\U00010000-\U0010ffff]))")
_COLOUR = re.compile(r"#[a-z0-9]+|[a-z]+", re.I)
_SIZE = re.compile(r"(-?)\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]{2})")
_SPACE = re.compile(r"\s*")


def _lex(text: str, pos: int, mode: str) -> _Token:
    if mode in ("color", "size"):
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        m = (_COLOUR if mode == "color" else _SIZE).match(text, pos)
        if not m:
            raise Fails(f"invalid {mode}")
        data = None if mode == "color" else (float(m.group(1) + m.group(2)), m.group(3))
        return _Token(m.group(0), m.end(), data)
    while True:
        if pos == len(text):
            return _Token("EOF", pos)
        m = _TOKEN.match(text, pos)
        if m is None:
            raise Fails(f"unexpected character {text[pos]!r}")
        if m.group(2):
            return _Token(m.group(2), pos + len(m.group(2)))
        if mode == "text":
            return _Token(" ", pos + len(m.group(1)))
        pos += len(m.group(1))


@dataclass
class _Parser:
    text: str
    mode: str = "math"
    pos: int = 0
    next: _Token = field(init=False)

    def __post_init__(self) -> None:
        self.next = _lex(self.text, 0, self.mode)

    def consume(self) -> None:
        self.pos = self.next.end
        self.next = _lex(self.text, self.pos, self.mode)

    def expect(self, text: str, consume: bool = True) -> None:
        if self.next.text != text:
            raise Fails(f"expected {text!r}, got {self.next.text!r}")
        if consume:
            self.consume()

    def parse(self) -> list[_Node]:
        body = self.expression()
        self.expect("EOF", False)
        return body

    def expression(self, break_on_infix: bool = False, break_on: str | None = None) -> list[_Node]:
        body: list[_Node] = []
        while True:
            tok, pos = self.next, self.pos
            if tok.text in _END_OF_EXPRESSION or (break_on and tok.text == break_on):
                break
            atom = self.atom()
            if atom is None:
                break
            if break_on_infix and atom.type == "infix":
                self.pos, self.next = pos, tok
                break
            body.append(atom)
        return self._infix(body)

    def _infix(self, body: list[_Node]) -> list[_Node]:
        at = [i for i, n in enumerate(body) if n.type == "infix"]
        if not at:
            return body
        if len(at) > 1:
            raise Fails("only one infix operator per group")
        i = at[0]

        def side(nodes: list[_Node]) -> _Node:
            return nodes[0] if len(nodes) == 1 and nodes[0].type == "ordgroup" else _Node("ordgroup", nodes, self.mode)

        return [self._call(body[i].value["replaceWith"], [side(body[:i]), side(body[i + 1:])])]

    def _script(self) -> _Node | None:
        self.consume()
        group = self.group()
        if group is None:
            return None
        if isinstance(group, str):
            if _FN[group].greediness > 1:
                return self.function(group)
            raise Fails(f"function {group} with no arguments as a script")
        return group

    def atom(self) -> _Node | None:
        base = self.implicit_group()
        if self.mode == "text":
            return base
        sup = sub = None
        while True:
            t = self.next.text
            if t in ("\\limits", "\\nolimits"):
                if base is None or base.type != "op":
                    raise Fails("limit controls must follow a math operator")
                base.value["limits"] = t == "\\limits"
                self.consume()
            elif t == "^":
                sup = self._script()
            elif t == "_":
                sub = self._script()
            elif t == "'":
                self.consume()
                primes = [_Node("textord", "\\prime", self.mode)]
                while self.next.text == "'":
                    primes.append(primes[0])
                    self.consume()
                sup = _Node("ordgroup", primes, self.mode)
            else:
                break
        if sup is not None or sub is not None:
            return _Node("supsub", {"base": base, "sup": sup, "sub": sub}, self.mode)
        return base

    def implicit_group(self) -> _Node | None:
        start = self.symbol()
        if start is None:
            return self.function()
        if start == "\\left":
            left = self.function(start)
            body = self.expression()
            self.expect("\\right", False)
            right = self.function()
            if left is None or right is None:
                raise Fails("\\left without its delimiters")
            return _Node("leftright", {"body": body, "left": left.value["value"], "right": right.value["value"]},
                         self.mode)
        if start == "\\begin":
            return self._environment(start)
        if isinstance(start, _Node) and start.value in ("\\matrix", "\\pmatrix", "\\cases"):
            self.expect("{", True)
            result = _ENVIRONMENTS[start.value[1:]](self)
            self.expect("}", True)
            return result
        if start in _SIZES:
            return _Node("sizing", {"original": start, "value": self.expression()}, self.mode)
        if start in _STYLES:
            return _Node("styling", {"original": start, "value": self.expression(True)}, self.mode)
        return self.function(start)

    def _environment(self, start: str) -> _Node:
        begin = self.function(start)
        assert begin is not None
        name = begin.value["name"]
        if name not in _ENVIRONMENTS:
            raise Fails(f"no such environment: {name}")
        args = self.arguments(_Fn(1 if name in ("array", "tabular") else 0))
        result = _ENVIRONMENTS[name](self, *args)
        self.expect("\\end", False)
        end = self.function()
        if end is None or end.value["name"] != name:
            raise Fails(f"\\begin{{{name}}} ended by another")
        return result

    def function(self, base: str | _Node | None = None) -> _Node | None:
        if base is None:
            base = self.group()
        if base is None or isinstance(base, _Node):
            return base
        return self._call(base, self.arguments(_FN[base]))

    def _call(self, name: str, args: list) -> _Node:
        value = _HANDLERS[name](name, args) if name in _HANDLERS else _handler(name, args)
        if value is None:  # a size or style command met as an argument: upstream's handler is null
            raise Fails(f"{name} has no handler")
        return _Node(value["type"], value, self.mode)

    def arguments(self, fn: _Fn) -> list:
        args: list = []
        last = None  # the script's argNode is one hoisted variable: an argument it skips repeats the one before
        for i in range(fn.args + fn.optional):
            kind = fn.types[i] if i < len(fn.types) else None
            if i < fn.optional:
                arg = self.special(kind, True) if kind else self.optional_group()
                if arg is None:
                    args.append(None)
                    continue
            else:
                arg = self.special(kind) if kind else self.group()
                if arg is None:
                    raise Fails("expected a group after a function")
            if isinstance(arg, str):
                # a function as argument is parsed only when it binds tighter; otherwise the script keeps the
                # previous argument in its place (none for the first, and every use of none throws)
                if _FN[arg].greediness > fn.greediness:
                    last = self.function(arg)
            else:
                last = arg
            args.append(last)
        return args

    def special(self, kind: str, optional: bool = False) -> str | _Node | None:
        outer = self.mode
        if kind == "original":
            kind = outer
        if kind in ("color", "size"):
            if optional and self.next.text != "[":
                return None
            self.mode = kind
            self.expect("[" if optional else "{")
            inner = self.next
            self.mode = outer
            self.consume()
            self.expect("]" if optional else "}")
            return _Node(kind, inner.text if kind == "color" else inner.data, outer)
        if kind == "text":
            self.pos = _SPACE.match(self.text, self.pos).end()  # type: ignore[union-attr]
        self.mode = kind
        self.next = _lex(self.text, self.pos, kind)
        res = self.optional_group() if optional else self.group()
        self.mode = outer
        self.next = _lex(self.text, self.pos, outer)
        return res

    def group(self) -> str | _Node | None:
        if self.next.text == "{":
            self.consume()
            body = self.expression()
            self.expect("}")
            return _Node("ordgroup", body, self.mode)
        return self.symbol()

    def optional_group(self) -> _Node | None:
        if self.next.text != "[":
            return None
        self.consume()
        body = self.expression(False, "]")
        self.expect("]")
        return _Node("ordgroup", body, self.mode)

    def symbol(self) -> str | _Node | None:
        """A function's name (str), a symbol's node, or None at the end or before '{'."""
        t = self.next.text
        if t in _FN:
            self.consume()
            return t
        if t in ("EOF", "{"):
            return None
        self.consume()
        return _Node(_group_of(t, self.mode), t, self.mode)


def _group_of(token: str, mode: str) -> str:
    """The symbol class that matters to the printer: "spacing" (a text-mode space), "mathord" (spelled out inside
    \\mathrm: letters, letter-like and unknown commands) or "textord" (everything else)."""
    if mode == "text" and token in _TEXT_SPACING:
        return "spacing"
    if len(token) > 1:  # a command, or '--' and '---', which the fork does not know
        return "textord" if mode == "math" and token[0] == "\\" and token[1:] in _NOT_LETTERS else "mathord"
    return "textord"


def _inner(body: _Node | None) -> list:
    if body is None:
        raise Fails("missing argument")
    return body.value if body.type == "ordgroup" else [body]


def _handler(name: str, args: list) -> dict | None:
    if name in _SIZES or name in _STYLES:
        return None
    if name[1:] in _OPS:
        limits, symbol = _OPS[name[1:]]
        return {"type": "op", "limits": limits, "symbol": symbol, "body": name}
    if name[1:] in _COLOURS:
        return {"type": "color", "value": _inner(args[0])}
    if name in _FONTS:
        return {"type": "font", "font": _FONT_ALIASES.get(name, name[1:]), "body": args[0]}
    if name in ("\\dfrac", "\\frac", "\\tfrac", "\\dbinom", "\\binom", "\\tbinom"):
        return {"type": "genfrac", "numer": args[0], "denom": args[1], "bar": "frac" in name}
    if name in ("\\left", "\\right") or name[:4] in ("\\big", "\\Big"):
        delim = args[0]
        if delim is None or delim.type == "ordgroup" or delim.value not in _DELIMITERS:
            raise Fails(f"invalid delimiter after {name}")
        kind = "leftright" if name in ("\\left", "\\right") else "delimsizing"
        return {"type": kind, "value": delim.value, "funcName": name}
    return {"type": "accent", "accent": name, "base": args[0]}


def _begin(name: str, args: list) -> dict:
    group = args[0]
    if group is None or group.type != "ordgroup":
        raise Fails("invalid environment name")
    return {"type": "environment", "name": "".join(str(n.value) for n in group.value)}


_HANDLERS = {
    "\\sqrt": lambda n, a: {"type": "sqrt", "index": a[0], "body": a[1]},
    **{f"\\{t}": (lambda n, a: {"type": "text", "body": _inner(a[0])}) for t in ("text", "mbox", "hbox", "vbox")},
    "\\color": lambda n, a: {"type": "color", "value": _inner(a[1])},
    "\\overline": lambda n, a: {"type": "overline", "body": a[0]},
    "\\underline": lambda n, a: {"type": "underline", "body": a[0]},
    "\\rule": lambda n, a: {"type": "rule", "width": a[1].value, "height": a[2].value},
    "\\KaTeX": lambda n, a: {"type": "katex"},
    "\\phantom": lambda n, a: {"type": "phantom", "value": _inner(a[0])},
    "\\llap": lambda n, a: {"type": "llap", "body": a[0]},
    "\\rlap": lambda n, a: {"type": "rlap", "body": a[0]},
    "\\over": lambda n, a: {"type": "infix", "replaceWith": "\\frac"},
    "\\choose": lambda n, a: {"type": "infix", "replaceWith": "\\binom"},
    "\\\\": lambda n, a: {"type": "cr", "size": a[0]},
    "\\cr": lambda n, a: {"type": "cr", "size": a[0]},
    "\\begin": _begin,
    "\\end": _begin,
}


def _array(p: _Parser, value: dict) -> _Node:
    """Rows of cells up to \\end or '}': cells split at '&', rows at \\\\ or \\cr."""
    rows: list[list[_Node]] = [[]]
    while True:
        rows[-1].append(_Node("ordgroup", p.expression(), p.mode))
        t = p.next.text
        if t == "&":
            p.consume()
        elif t in ("\\end", "}"):
            break
        elif t in ("\\\\", "\\cr"):
            p.function()
            rows.append([])
        else:
            raise Fails("expected & or \\\\ or \\end")
    return _Node("array", {**value, "body": rows}, p.mode)


def _aligned_cols(p: _Parser, spec: _Node | None = None) -> dict:
    if spec is None:
        raise Fails("array without its column spec")
    cols = []
    for node in (spec.value if spec.type == "ordgroup" else [spec]):
        ca = node.value
        cols.append({"align": ca} if isinstance(ca, str) and ca in "lcr" else None)
    return {"cols": cols}


def _delimited(left: str | None, right: str | None):
    def env(p: _Parser, *args: Any) -> _Node:
        res = _array(p, {"cols": None})
        return res if left is None else _Node("leftright", {"body": [res], "left": left, "right": right}, p.mode)
    return env


def _cases(p: _Parser, *args: Any) -> _Node:
    res = _array(p, {"cols": [{"align": "l"}, {"align": "l"}]})
    return _Node("leftright", {"body": [res], "left": "\\{", "right": "."}, p.mode)


def _aligned(p: _Parser, *args: Any) -> _Node:
    res = _array(p, {"cols": []})
    empty = _Node("ordgroup", [], p.mode)
    width = 0
    for row in res.value["body"]:
        for cell in row[1::2]:
            cell.value.insert(0, empty)
        width = max(width, len(row))
    res.value["cols"] = [{"align": "l" if i % 2 else "r"} for i in range(width)]
    return res


_ENVIRONMENTS = {
    "array": lambda p, spec=None: _array(p, _aligned_cols(p, spec)),
    "tabular": lambda p, spec=None: _array(p, _aligned_cols(p, spec)),
    "matrix": _delimited(None, None), "pmatrix": _delimited("(", ")"), "bmatrix": _delimited("[", "]"),
    "Bmatrix": _delimited("\\{", "\\}"), "vmatrix": _delimited("|", "|"),
    "Vmatrix": _delimited("\\Vert", "\\Vert"), "picture": _cases, "cases": _cases, "aligned": _aligned,
}


class _Printer:
    """The fork's tree-to-LaTeX printer: every token followed by one space, groups in '{ … }'."""

    def __init__(self) -> None:
        self.out = ""

    def many(self, nodes: list, font: str | None) -> None:
        for node in nodes:
            self.one(node, font)

    def one(self, node: _Node | None, font: str | None) -> None:  # noqa: C901 -- one branch per node type
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

    def _script(self, mark: str, node: _Node, font: str | None) -> None:
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
        tree = _Parser(_clean(line)).parse()
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
