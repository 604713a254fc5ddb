"""The lexer and parser of CDM's tokenizer (:mod:`.cdm_tokenize`): the fork's grammar (:mod:`.cdm_grammar`) read
the way its parser reads it, leniencies included, and the environments it knows."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from quantgate.scoring.omnidoc.cdm_grammar import (
    END_OF_EXPRESSION,
    FUNCTIONS,
    HANDLERS,
    SIZES,
    STYLES,
    Fails,
    Fn,
    Node,
    _handler,
    group_of,
)


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
class Parser:
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

    def parse(self) -> list[Node]:
        body = self.expression()
        self.expect("EOF", False)
        return body

    def expression(self, break_on_infix: bool = False, break_on: str | None = None) -> list[Node]:
        body: list[Node] = []
        while True:
            tok, pos = self.next, self.pos
            if tok.text in END_OF_EXPRESSION or (break_on and tok.text == break_on):
                break
            atom = self.atom()
            if atom is None:
                break
            if break_on_infix and atom.type == "infix":
                self.pos, self.next = pos, tok
                break
            body.append(atom)
        return self._infix(body)

    def _infix(self, body: list[Node]) -> list[Node]:
        at = [i for i, n in enumerate(body) if n.type == "infix"]
        if not at:
            return body
        if len(at) > 1:
            raise Fails("only one infix operator per group")
        i = at[0]

        def side(nodes: list[Node]) -> Node:
            return nodes[0] if len(nodes) == 1 and nodes[0].type == "ordgroup" else Node("ordgroup", nodes, self.mode)

        return [self._call(body[i].value["replaceWith"], [side(body[:i]), side(body[i + 1:])])]

    def _script(self) -> Node | None:
        self.consume()
        group = self.group()
        if group is None:
            return None
        if isinstance(group, str):
            if FUNCTIONS[group].greediness > 1:
                return self.function(group)
            raise Fails(f"function {group} with no arguments as a script")
        return group

    def atom(self) -> Node | None:
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
                primes = [Node("textord", "\\prime", self.mode)]
                while self.next.text == "'":
                    primes.append(primes[0])
                    self.consume()
                sup = Node("ordgroup", primes, self.mode)
            else:
                break
        if sup is not None or sub is not None:
            return Node("supsub", {"base": base, "sup": sup, "sub": sub}, self.mode)
        return base

    def implicit_group(self) -> Node | None:
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
            return Node("leftright", {"body": body, "left": left.value["value"], "right": right.value["value"]},
                         self.mode)
        if start == "\\begin":
            return self._environment(start)
        if isinstance(start, Node) and start.value in ("\\matrix", "\\pmatrix", "\\cases"):
            self.expect("{", True)
            result = ENVIRONMENTS[start.value[1:]](self)
            self.expect("}", True)
            return result
        if start in SIZES:
            return Node("sizing", {"original": start, "value": self.expression()}, self.mode)
        if start in STYLES:
            return Node("styling", {"original": start, "value": self.expression(True)}, self.mode)
        return self.function(start)

    def _environment(self, start: str) -> Node:
        begin = self.function(start)
        assert begin is not None
        name = begin.value["name"]
        if name not in ENVIRONMENTS:
            raise Fails(f"no such environment: {name}")
        args = self.arguments(Fn(1 if name in ("array", "tabular") else 0))
        result = ENVIRONMENTS[name](self, *args)
        self.expect("\\end", False)
        end = self.function()
        if end is None or end.value["name"] != name:
            raise Fails(f"\\begin{{{name}}} ended by another")
        return result

    def function(self, base: str | Node | None = None) -> Node | None:
        if base is None:
            base = self.group()
        if base is None or isinstance(base, Node):
            return base
        return self._call(base, self.arguments(FUNCTIONS[base]))

    def _call(self, name: str, args: list) -> Node:
        value = HANDLERS[name](name, args) if name in HANDLERS else _handler(name, args)
        if value is None:  # a size or style command met as an argument: upstream's handler is null
            raise Fails(f"{name} has no handler")
        return Node(value["type"], value, self.mode)

    def arguments(self, fn: Fn) -> list:
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
                if FUNCTIONS[arg].greediness > fn.greediness:
                    last = self.function(arg)
            else:
                last = arg
            args.append(last)
        return args

    def special(self, kind: str, optional: bool = False) -> str | Node | None:
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
            return Node(kind, inner.text if kind == "color" else inner.data, outer)
        if kind == "text":
            self.pos = _SPACE.match(self.text, self.pos).end()  # type: ignore[union-attr]
        self.mode = kind
        self.next = _lex(self.text, self.pos, kind)
        res = self.optional_group() if optional else self.group()
        self.mode = outer
        self.next = _lex(self.text, self.pos, outer)
        return res

    def group(self) -> str | Node | None:
        if self.next.text == "{":
            self.consume()
            body = self.expression()
            self.expect("}")
            return Node("ordgroup", body, self.mode)
        return self.symbol()

    def optional_group(self) -> Node | None:
        if self.next.text != "[":
            return None
        self.consume()
        body = self.expression(False, "]")
        self.expect("]")
        return Node("ordgroup", body, self.mode)

    def symbol(self) -> str | Node | None:
        """A function's name (str), a symbol's node, or None at the end or before '{'."""
        t = self.next.text
        if t in FUNCTIONS:
            self.consume()
            return t
        if t in ("EOF", "{"):
            return None
        self.consume()
        return Node(group_of(t, self.mode), t, self.mode)




def _array(p: Parser, value: dict) -> Node:
    """Rows of cells up to \\end or '}': cells split at '&', rows at \\\\ or \\cr."""
    rows: list[list[Node]] = [[]]
    while True:
        rows[-1].append(Node("ordgroup", p.expression(), p.mode))
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
    return Node("array", {**value, "body": rows}, p.mode)


def _aligned_cols(p: Parser, spec: Node | None = None) -> dict:
    if spec is None:
        raise Fails("array without its column spec")
    cols = []
    for node in (spec.value if spec.type == "ordgroup" else [spec]):
        ca = node.value
        cols.append({"align": ca} if isinstance(ca, str) and ca in "lcr" else None)
    return {"cols": cols}


def _delimited(left: str | None, right: str | None):
    def env(p: Parser, *args: Any) -> Node:
        res = _array(p, {"cols": None})
        return res if left is None else Node("leftright", {"body": [res], "left": left, "right": right}, p.mode)
    return env


def _cases(p: Parser, *args: Any) -> Node:
    res = _array(p, {"cols": [{"align": "l"}, {"align": "l"}]})
    return Node("leftright", {"body": [res], "left": "\\{", "right": "."}, p.mode)


def _aligned(p: Parser, *args: Any) -> Node:
    res = _array(p, {"cols": []})
    empty = Node("ordgroup", [], p.mode)
    width = 0
    for row in res.value["body"]:
        for cell in row[1::2]:
            cell.value.insert(0, empty)
        width = max(width, len(row))
    res.value["cols"] = [{"align": "l" if i % 2 else "r"} for i in range(width)]
    return res


ENVIRONMENTS = {
    "array": lambda p, spec=None: _array(p, _aligned_cols(p, spec)),
    "tabular": lambda p, spec=None: _array(p, _aligned_cols(p, spec)),
    "matrix": _delimited(None, None), "pmatrix": _delimited("(", ")"), "bmatrix": _delimited("[", "]"),
    "Bmatrix": _delimited("\\{", "\\}"), "vmatrix": _delimited("|", "|"),
    "Vmatrix": _delimited("\\Vert", "\\Vert"), "picture": _cases, "cases": _cases, "aligned": _aligned,
}


