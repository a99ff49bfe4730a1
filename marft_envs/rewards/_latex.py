"""A small, guarded parser for the MATH grader (`rewards.math`): a scalar answer to a tree of tuples.

`parse` reads a normalised scalar expression (see `rewards._latex_normalise`) into plain tuples:

    ('num', Fraction, is_decimal)   ('sym', name)        ('const', 'pi' | 'e' | 'i' | 'inf')
    ('add', (terms...))             ('mul', (factors...)) ('inv', x)   ('neg', x)   ('pm', x)
    ('pow', base, exp)              ('root', x, index)   ('func', name, x)   ('fact', x)
    ('binom', n, k)                 ('abs', x)           ('floor', x)   ('ceil', x)
    ('base', digits, base)          # a base-b numeral such as 52_8

Everything here is pure and bounded: inputs are capped by the caller, bracket nesting and recursion
are capped here, and anything unexpected raises `ParseError`.
"""

from __future__ import annotations

import re
from fractions import Fraction

MAX_DEPTH = 30  # bracket nesting / parser recursion; deeper input is compared as text only
_MAX_DIGITS = 300  # longer numerals would make exact arithmetic slow (and int() refuses > 4300)


class ParseError(ValueError):
    """The string is not an expression this parser understands."""


# ---------------------------------------------------------------------------------------------
# Tokens
# ---------------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<rep>(?P<rep_int>\d*)\.(?P<rep_fix>\d*)\\(?:overline|bar)\s*(?:\{(?P<rep_b>\d+)\}|(?P<rep_d>\d)))
  | (?P<base>(?P<base_digits>\d+)_(?:\{(?P<base_b>\d+)\}|(?P<base_d>\d)))
  | (?P<num>\d+\.?\d*|\.\d+)
  | (?P<cmd>\\[a-zA-Z]+|\\[{}|])
  | (?P<sym>[a-zA-Z])
  | (?P<op>[-+*/^_()\[\]{},|!=<>&'])
""",
    re.X,
)
_ESCAPED = {"\\{": ("op", "("), "\\}": ("op", ")"), "\\|": ("op", "|")}


def tokenize(s: str) -> list[tuple[str, object]]:
    """Split a normalised scalar answer into (kind, value) tokens."""
    tokens, pos = [], 0
    while pos < len(s):
        m = _TOKEN.match(s, pos)
        if m is None:
            raise ParseError(f"unexpected character {s[pos]!r}")
        pos, kind = m.end(), m.lastgroup
        if kind == "ws":
            continue
        if kind == "rep":
            tokens.append(("num", (_repeating(m["rep_int"], m["rep_fix"], m["rep_b"] or m["rep_d"]), False)))
        elif kind == "base":
            digits = m["base_digits"].lstrip("0") or "0"
            tokens.append(("base", (digits, int(m["base_b"] or m["base_d"]))))
        elif kind == "num":
            text = m["num"]
            if len(text) > _MAX_DIGITS:
                raise ParseError("numeral too long")
            tokens.append(("num", text))
        elif kind == "cmd":
            tokens.append(_ESCAPED.get(m["cmd"], ("cmd", m["cmd"][1:])))
        else:
            tokens.append((kind, m[kind]))
    return tokens


def _repeating(whole: str, fixed: str, period: str) -> Fraction:
    """Exact value of whole.fixed(period)(period)...: 0.1\\overline{6} == 1/6."""
    if len(whole) + len(fixed) + len(period) > _MAX_DIGITS:
        raise ParseError("numeral too long")
    tail = Fraction(int(fixed + period) - int(fixed or "0"), (10 ** len(period) - 1) * 10 ** len(fixed))
    return int(whole or "0") + tail


def _number(text: str) -> tuple[str, tuple]:
    return ("num", Fraction(text.rstrip(".")), "." in text)


# ---------------------------------------------------------------------------------------------
# Parser (recursive descent; implicit multiplication; LaTeX one-token arguments)
# ---------------------------------------------------------------------------------------------

FUNCTIONS = {"sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "ln", "log", "exp"}
_GREEK = {
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "rho",
    "sigma",
    "tau",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
    "Gamma",
    "Delta",
    "Theta",
    "Lambda",
    "Xi",
    "Sigma",
    "Phi",
    "Psi",
    "Omega",
}
_CONSTANTS = {"pi": ("const", "pi"), "infty": ("const", "inf"), "e": ("const", "e"), "i": ("const", "i")}
_ATOM_COMMANDS = FUNCTIONS | _GREEK | {"frac", "sqrt", "binom", "pi", "infty", "lfloor", "lceil"}
_CLOSERS = {")", "]", "}"}


def parse(s: str) -> tuple[tuple, int]:
    """Parse a normalised scalar answer into (tree, number of `\\pm` signs); raises ParseError."""
    parser = _Parser(tokenize(s))
    tree = parser.expr()
    if parser.pos != len(parser.tokens):
        raise ParseError(f"unexpected {parser.tokens[parser.pos][1]!r}")
    return tree, parser.n_pm


class _Parser:
    def __init__(self, tokens):
        self.tokens, self.pos, self.depth, self.abs_depth, self.n_pm = tokens, 0, 0, 0, 0

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else (None, None)

    def take(self):
        tok = self.peek()
        if tok[0] is None:
            raise ParseError("unexpected end")
        self.pos += 1
        return tok

    def at(self, kind, value=None) -> bool:
        tok = self.peek()
        return tok[0] == kind and (value is None or tok[1] == value)

    def expect(self, kind, values):
        tok = self.take()
        if tok[0] != kind or tok[1] not in values:
            raise ParseError(f"expected {values}")

    def enter(self):
        self.depth += 1
        if self.depth > 3 * MAX_DEPTH:
            raise ParseError("nested too deeply")

    # expr := term (('+' | '-' | '\pm' | '\mp') term)*
    def expr(self):
        terms = [self.signed_term()]
        while self.at("op", "+") or self.at("op", "-") or self.at("cmd", "pm") or self.at("cmd", "mp"):
            terms.append(self.signed_term())
        return ("add", tuple(terms)) if len(terms) > 1 else terms[0]

    def signed_term(self):
        if self.at("cmd", "pm") or self.at("cmd", "mp"):
            self.take()
            self.n_pm += 1
            return ("pm", self.term())
        if self.at("op", "-"):
            self.take()
            return ("neg", self.term())
        if self.at("op", "+"):
            self.take()
        return self.term()

    # term := power (('*' | '/' | implicit) power)*
    def term(self):
        factors = [self.power()]
        while True:
            if self.at("op", "*"):
                self.take()
                factors.append(self.unary())
            elif self.at("op", "/"):
                self.take()
                factors.append(("inv", self.unary()))
            elif self.starts_atom():
                if self.at("num") and self.tokens[self.pos - 1][0] == "num":
                    raise ParseError("two numerals in a row")  # `10 000`, `2 3`: not a product
                factors.append(self.power())
            else:
                break
        return ("mul", tuple(factors)) if len(factors) > 1 else factors[0]

    def unary(self):
        self.enter()
        if self.at("op", "-"):
            self.take()
            node = ("neg", self.unary())
        elif self.at("op", "+"):
            self.take()
            node = self.unary()
        else:
            node = self.power()
        self.depth -= 1
        return node

    def starts_atom(self) -> bool:
        kind, value = self.peek()
        if kind in ("num", "base", "sym"):
            return True
        if kind == "op":
            return value in "([{" or (value == "|" and self.abs_depth == 0)
        return kind == "cmd" and value in _ATOM_COMMANDS

    # power := postfix ('^' exponent)?  -- right associative: 9^9^9 is 9^(9^9)
    def power(self):
        base = self.postfix()
        if self.at("op", "^"):
            self.take()
            return ("pow", base, self.exponent())
        return base

    def exponent(self):
        self.enter()
        if self.at("op", "-"):
            self.take()
            node = ("neg", self.exponent())
        elif self.at("op", "+"):
            self.take()
            node = self.exponent()
        elif self.at("num"):  # plain-text convention: 2^10 is 2^{10}
            node = _number(self.take()[1])
        else:
            node = self.atom()
        if self.at("op", "^"):
            self.take()
            node = ("pow", node, self.exponent())
        self.depth -= 1
        return node

    def postfix(self):
        node = self.atom()
        if self.at("op", "!"):  # one only: `3!!` is a double factorial, which we do not evaluate
            self.take()
            node = ("fact", node)
        return node

    def atom(self):
        self.enter()
        kind, value = self.take()
        if kind == "num":
            node = self.mixed_number(value) if isinstance(value, str) else ("num", value[0], value[1])
        elif kind == "base":
            node = ("base", *value)
        elif kind == "sym":
            node = self.symbol(value)
        elif kind == "op" and value in "([{":
            node = self.expr()
            self.expect("op", _CLOSERS)
        elif kind == "op" and value == "|":
            self.abs_depth += 1
            node = ("abs", self.expr())
            self.abs_depth -= 1
            self.expect("op", "|")
        elif kind == "cmd":
            node = self.command(value)
        else:
            raise ParseError(f"unexpected {value!r}")
        self.depth -= 1
        return node

    def mixed_number(self, text):
        # MATH writes mixed numbers as `1\frac{4}{5}`: an integer followed by a numeric fraction.
        if "." not in text and self.at("cmd", "frac"):
            saved, saved_tokens = self.pos, list(self.tokens)  # argument() may split a numeral
            self.take()
            num, den = self.argument(), self.argument()
            if _is_integer(num) and _is_integer(den):
                return ("add", (_number(text), ("mul", (num, ("inv", den)))))
            self.pos, self.tokens = saved, saved_tokens
        return _number(text)

    def symbol(self, name):
        if self.at("op", "_"):  # x_1, a_{12}: a subscript is part of the name
            self.take()
            if self.at("op", "{"):
                end = self.pos + 1
                while end < len(self.tokens) and self.tokens[end] != ("op", "}"):
                    end += 1
                if end == len(self.tokens):
                    raise ParseError("unclosed subscript")
                sub = "".join(str(v) for _, v in self.tokens[self.pos + 1 : end])
                self.pos = end + 1
            else:
                sub = str(self.take()[1])
            return ("sym", f"{name}_{sub}")
        return _CONSTANTS.get(name, ("sym", name)) if len(name) == 1 else ("sym", name)

    def command(self, name):
        if name == "frac":
            num, den = self.argument(), self.argument()
            return ("mul", (num, ("inv", den)))
        if name == "sqrt":
            index = ("num", Fraction(2), False)
            if self.at("op", "["):
                self.take()
                index = self.expr()
                self.expect("op", "]")
            return ("root", self.argument(), index)
        if name == "binom":
            return ("binom", self.argument(), self.argument())
        if name in ("pi", "infty"):
            return _CONSTANTS[name]
        if name in _GREEK:
            return self.symbol(name)
        if name in ("lfloor", "lceil"):
            node = self.expr()
            self.expect("cmd", {"rfloor", "rceil"})
            return ("floor" if name == "lfloor" else "ceil", node)
        if name in FUNCTIONS:
            return self.function(name)
        raise ParseError(f"unknown command \\{name}")

    def function(self, name):
        base = exponent = None
        if name == "log" and self.at("op", "_"):
            self.take()
            base = self.argument()
        if self.at("op", "^"):  # \sin^2 x
            self.take()
            exponent = self.exponent()
        if self.at("op", "("):
            arg = self.atom()
        else:  # \sin 2x: the argument runs over an implicit product, up to the next function
            factors = [self.power()]
            while self.starts_atom() and not self.at("op", "(") and self.peek()[1] not in FUNCTIONS:
                factors.append(self.power())
            arg = ("mul", tuple(factors)) if len(factors) > 1 else factors[0]
        node = ("func", "ln" if name == "log" else name, arg)
        if base is not None:
            node = ("mul", (node, ("inv", ("func", "ln", base))))
        return ("pow", node, exponent) if exponent is not None else node

    def argument(self):
        """A LaTeX macro argument: a braced group or a single token (`\\frac43` is 4/3)."""
        kind, value = self.peek()
        if kind == "num" and isinstance(value, str) and len(value) > 1:
            self.tokens[self.pos] = ("num", value[1:])  # take one digit, leave the rest
            return _number(value[0])
        if kind == "op" and value == "{":
            self.take()
            node = self.expr()
            self.expect("op", "}")
            return node
        return self.atom()


def _is_integer(node) -> bool:
    return node[0] == "num" and node[1].denominator == 1 and not node[2]
