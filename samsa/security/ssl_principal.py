"""ssl.principal.mapping.rules: the principal name of a TLS client certificate's subject DN.

Kafka's rule syntax: a list of `RULE:pattern/replacement/` (optionally followed by `L` or `U`
to lower- or upper-case the result) and `DEFAULT` (the DN itself, RFC 2253 form such as
`CN=alice,OU=eng,O=acme`). Rules are tried in order; the first whose pattern matches the whole
DN gives the name (Java's `$1` group references work). No matching rule: the client cannot be
authenticated (Kafka fails the connection).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class NoMatchingRule(ValueError):
    """No rule of ssl.principal.mapping.rules matched the certificate's DN."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        out = self.pattern.sub(self.replacement, dn)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def _until_slash(text: str, i: int) -> tuple[str, int]:
    """The text from i up to the next unescaped '/' (an escaped '/' becomes '/'), and the
    index after that slash."""
    out: list[str] = []
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append("/" if nxt == "/" else c + nxt)
            i += 2
            continue
        if c == "/":
            return "".join(out), i + 1
        out.append(c)
        i += 1
    raise ValueError("missing '/'")


def _java_replacement(rep: str) -> str:
    """Java's $1 / ${name} group references -> Python's \\g<1> / \\g<name>."""
    rep = rep.replace("\\\\", "\x00")
    rep = re.sub(r"\$\{(\w+)\}", r"\\g<\1>", rep)
    rep = re.sub(r"\$(\d+)", r"\\g<\1>", rep)
    return rep.replace("\x00", "\\\\")


class SslPrincipalMapper:
    def __init__(self, rules: list[_Rule]) -> None:
        self.rules = rules

    @classmethod
    def parse(cls, value: str) -> SslPrincipalMapper:
        """Parse the config value; ValueError with the offending text when it is not Kafka's
        syntax."""
        rules: list[_Rule] = []
        i, text = 0, value
        while i < len(text):
            if text[i] in " \t\n,":
                i += 1
                continue
            if text.startswith("DEFAULT", i):
                rules.append(_Rule(None))
                i += len("DEFAULT")
            elif text.startswith("RULE:", i):
                try:
                    pattern, i = _until_slash(text, i + len("RULE:"))
                    replacement, i = _until_slash(text, i)
                    compiled = re.compile(pattern)
                except (ValueError, re.error) as e:
                    raise ValueError(f"Invalid rule in ssl.principal.mapping.rules: "
                                     f"{text[i:]!r} ({e})") from None
                case = ""
                if i < len(text) and text[i] in "LU":
                    case = text[i]
                    i += 1
                rules.append(_Rule(compiled, _java_replacement(replacement), case))
            else:
                raise ValueError(f"Invalid rule: {text[i:]}")
            if i < len(text) and text[i] not in " \t\n,":
                raise ValueError(f"Invalid rule: {text[i:]}")
        return cls(rules or [_Rule(None)])

    def name(self, dn: str) -> str:
        for rule in self.rules:
            out = rule.apply(dn)
            if out is not None:
                return out
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self.rules}")
