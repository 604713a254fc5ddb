"""The grammar of CDM's tokenizer (im2markup's fork of KaTeX 0.6, as OmniDocBench v1.5 runs it; see
:mod:`.cdm_tokenize`): which commands are functions and with how many arguments and what greediness, what each
builds, and the one table of data taken from the fork (:data:`NOT_LETTERS`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# backslash commands the fork knows as symbols of a class other than "mathord" (letters): inside \mathrm{...} these
# print whole, an unknown or letter-like command (\alpha, \foo) character by character
NOT_LETTERS = frozenset((
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
TEXT_SPACING = {" ", "\\ ", "~"}
SIZES = ("\\tiny", "\\scriptsize", "\\footnotesize", "\\small", "\\normalsize", "\\large", "\\Large", "\\LARGE",
          "\\huge", "\\Huge", "\\textrm", "\\rm", "\\cal", "\\bf", "\\siptstyle", "\\boldmath", "\\it")
STYLES = ("\\displaystyle", "\\textstyle", "\\scriptstyle", "\\scriptscriptstyle")
END_OF_EXPRESSION = ("}", "\\end", "\\right", "&", "\\\\", "\\cr")
DELIMITERS = frozenset(("(", ")", "[", "\\lbrack", "]", "\\rbrack", "\\{", "\\lbrace", "\\}", "\\rbrace",
                         "\\lfloor", "\\rfloor", "\\lceil", "\\rceil", "<", ">", "\\langle", "\\rangle", "\\lt",
                         "\\gt", "\\lvert", "\\rvert", "\\lVert", "\\rVert", "\\lgroup", "\\rgroup", "\\lmoustache",
                         "\\rmoustache", "/", "\\backslash", "|", "\\vert", "\\|", "\\Vert", "\\uparrow", "\\Uparrow",
                         "\\downarrow", "\\Downarrow", "\\updownarrow", "\\Updownarrow", "."))
COLOURS = ("blue orange pink red green gray purple " + " ".join(
    f"{c}{x}" for c, xs in (("blue", "ABCDE"), ("teal", "ABCDE"), ("green", "ABCDE"), ("gold", "ABCDE"),
                            ("red", "ABCDE"), ("maroon", "ABCDE"), ("purple", "ABCDE"), ("mint", "ABC"),
                            ("gray", "ABCDEFGHI")) for x in xs) + " kaBlue kaGreen").split()
FONT_ALIASES = {"\\Bbb": "mathbb", "\\bold": "mathbf", "\\frak": "mathfrak"}
FONTS = ("\\mathrm", "\\mathit", "\\mathbf", "\\mathop", "\\stackrel", "\\mathbb", "\\mathcal", "\\mathfrak",
          "\\mathscr", "\\mathsf", "\\mathtt", "\\label", "\\comment", "\\hspace", "\\vspace", "\\atop", "\\fbox",
          "\\tag", "\\makebox", "\\raisebox", "\\framebox", "\\circle", "\\line", "\\put", "\\vphantom", "\\textup",
          "\\noalign", "\\Bbb", "\\bold", "\\frak")
OPS = {**dict.fromkeys("arcsin arccos arctan arg cos cosh cot coth csc deg dim exp hom ker lg ln log sec sin sinh "
                        "tan tanh".split(), (False, False)),
        **dict.fromkeys("det gcd inf lim liminf limsup max min Pr sup".split(), (True, False)),
        **dict.fromkeys("int iint iiint oint".split(), (False, True)),
        **dict.fromkeys("coprod bigvee bigwedge biguplus bigcap bigcup intop prod sum bigotimes bigoplus bigodot "
                        "bigsqcup smallint".split(), (True, True))}  # name -> (limits, symbol)


@dataclass(frozen=True)
class Fn:
    args: int
    optional: int = 0
    types: tuple[str, ...] = ()
    greediness: int = 1


def _functions() -> dict[str, Fn]:
    fns = {"\\sqrt": Fn(1, 1), "\\color": Fn(2, 0, ("color", "original"), 3), "\\overline": Fn(1),
           "\\underline": Fn(1), "\\rule": Fn(2, 1, ("size", "size", "size")), "\\KaTeX": Fn(0),
           "\\phantom": Fn(1), "\\llap": Fn(1), "\\rlap": Fn(1), "\\over": Fn(0), "\\choose": Fn(0),
           "\\\\": Fn(0, 1, ("size",)), "\\cr": Fn(0, 1, ("size",)), "\\begin": Fn(1, 0, ("text",)),
           "\\end": Fn(1, 0, ("text",))}
    fns |= {f"\\{n}": Fn(1, 0, ("text",), 2) for n in ("text", "mbox", "hbox", "vbox")}
    fns |= {f"\\{n}": Fn(1, 0, (), 3) for n in COLOURS}
    fns |= {f"\\{n}": Fn(0) for n in OPS}
    fns |= {f"\\{n}": Fn(2, 0, (), 2) for n in ("dfrac", "frac", "tfrac", "dbinom", "binom", "tbinom")}
    fns |= {f"\\{a}{b}": Fn(1) for a in ("big", "Big", "bigg", "Bigg") for b in ("l", "r", "m", "")}
    fns |= {"\\left": Fn(1), "\\right": Fn(1)}
    fns |= {n: Fn(0) for n in (*SIZES, *STYLES)}
    fns |= {n: Fn(1, 0, (), 2) for n in FONTS}
    fns |= {f"\\{n}": Fn(1) for n in ("acute", "grave", "ddot", "tilde", "bar", "breve", "check", "hat", "vec",
                                       "dot")}
    return fns


FUNCTIONS = _functions()


class Fails(Exception):
    """Where upstream's tokenizer throws (its output is then an empty line)."""


@dataclass
class Node:
    type: str
    value: Any
    mode: str = "math"




def group_of(token: str, mode: str) -> str:
    """The symbol class that matters to the printer: "spacing" (a text-mode space), "mathord" (spelled out inside
    \\mathrm: letters, letter-like and unknown commands) or "textord" (everything else)."""
    if mode == "text" and token in TEXT_SPACING:
        return "spacing"
    if len(token) > 1:  # a command, or '--' and '---', which the fork does not know
        return "textord" if mode == "math" and token[0] == "\\" and token[1:] in NOT_LETTERS else "mathord"
    return "textord"


def inner(body: Node | None) -> list:
    if body is None:
        raise Fails("missing argument")
    return body.value if body.type == "ordgroup" else [body]


def _handler(name: str, args: list) -> dict | None:
    if name in SIZES or name in STYLES:
        return None
    if name[1:] in OPS:
        limits, symbol = OPS[name[1:]]
        return {"type": "op", "limits": limits, "symbol": symbol, "body": name}
    if name[1:] in COLOURS:
        return {"type": "color", "value": inner(args[0])}
    if name in FONTS:
        return {"type": "font", "font": FONT_ALIASES.get(name, name[1:]), "body": args[0]}
    if name in ("\\dfrac", "\\frac", "\\tfrac", "\\dbinom", "\\binom", "\\tbinom"):
        return {"type": "genfrac", "numer": args[0], "denom": args[1], "bar": "frac" in name}
    if name in ("\\left", "\\right") or name[:4] in ("\\big", "\\Big"):
        delim = args[0]
        if delim is None or delim.type == "ordgroup" or delim.value not in DELIMITERS:
            raise Fails(f"invalid delimiter after {name}")
        kind = "leftright" if name in ("\\left", "\\right") else "delimsizing"
        return {"type": kind, "value": delim.value, "funcName": name}
    return {"type": "accent", "accent": name, "base": args[0]}


def _begin(name: str, args: list) -> dict:
    group = args[0]
    if group is None or group.type != "ordgroup":
        raise Fails("invalid environment name")
    return {"type": "environment", "name": "".join(str(n.value) for n in group.value)}


HANDLERS = {
    "\\sqrt": lambda n, a: {"type": "sqrt", "index": a[0], "body": a[1]},
    **{f"\\{t}": (lambda n, a: {"type": "text", "body": inner(a[0])}) for t in ("text", "mbox", "hbox", "vbox")},
    "\\color": lambda n, a: {"type": "color", "value": inner(a[1])},
    "\\overline": lambda n, a: {"type": "overline", "body": a[0]},
    "\\underline": lambda n, a: {"type": "underline", "body": a[0]},
    "\\rule": lambda n, a: {"type": "rule", "width": a[1].value, "height": a[2].value},
    "\\KaTeX": lambda n, a: {"type": "katex"},
    "\\phantom": lambda n, a: {"type": "phantom", "value": inner(a[0])},
    "\\llap": lambda n, a: {"type": "llap", "body": a[0]},
    "\\rlap": lambda n, a: {"type": "rlap", "body": a[0]},
    "\\over": lambda n, a: {"type": "infix", "replaceWith": "\\frac"},
    "\\choose": lambda n, a: {"type": "infix", "replaceWith": "\\binom"},
    "\\\\": lambda n, a: {"type": "cr", "size": a[0]},
    "\\cr": lambda n, a: {"type": "cr", "size": a[0]},
    "\\begin": _begin,
    "\\end": _begin,
}


