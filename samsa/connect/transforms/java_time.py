"""Java SimpleDateFormat patterns (`yyyy-MM-dd'T'HH:mm:ss.SSSZ`), formatting and parsing in UTC,
so TimestampConverter's `format` and TimestampRouter's `timestamp.format` take the patterns Kafka
users already write. The common letters are supported; any other letter is refused the way Java
refuses it (`Illegal pattern character`)."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_LETTERS = set("GyYMLdHkKhmsSEaDuzZX")
_NUMERIC = set("yYdHkKhmsSDu") | {"M", "L"}


class PatternError(ValueError):
    """The pattern is not a valid SimpleDateFormat pattern."""


@dataclass(frozen=True)
class _Token:
    letter: str  # "" for literal text
    count: int
    text: str = ""

    @property
    def numeric(self) -> bool:
        return self.letter in _NUMERIC and not (self.letter in "ML" and self.count >= 3)


def _tokens(pattern: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            if i + 1 < n and pattern[i + 1] == "'":
                out.append(_Token("", 0, "'"))
                i += 2
                continue
            j, buf = i + 1, []
            while True:
                if j >= n:
                    raise PatternError(f"Unterminated quote in pattern {pattern!r}")
                if pattern[j] == "'":
                    if j + 1 < n and pattern[j + 1] == "'":
                        buf.append("'")
                        j += 2
                        continue
                    break
                buf.append(pattern[j])
                j += 1
            out.append(_Token("", 0, "".join(buf)))
            i = j + 1
        elif c.isascii() and c.isalpha():
            if c not in _LETTERS:
                raise PatternError(f"Illegal pattern character '{c}'")
            j = i
            while j < n and pattern[j] == c:
                j += 1
            out.append(_Token(c, j - i))
            i = j
        else:
            out.append(_Token("", 0, c))
            i += 1
    return out


class SimpleDateFormat:
    """One compiled pattern; times are UTC (Kafka's transforms set the UTC time zone)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.tokens = _tokens(pattern)

    # ---- formatting -------------------------------------------------------------------------
    def format(self, when: datetime.datetime) -> str:
        when = when.astimezone(datetime.UTC) if when.tzinfo else when.replace(tzinfo=datetime.UTC)
        return "".join(self._format_one(t, when) for t in self.tokens)

    @staticmethod
    def _format_one(t: _Token, d: datetime.datetime) -> str:
        c, n = t.letter, t.count
        if not c:
            return t.text

        def num(v: int) -> str:
            return str(v).zfill(n)
        if c == "G":
            return "AD" if d.year > 0 else "BC"
        if c in "yY":
            return str(d.year % 100).zfill(2) if n == 2 else num(d.year)
        if c in "ML":
            if n >= 4:
                return _MONTHS[d.month - 1]
            if n == 3:
                return _MONTHS[d.month - 1][:3]
            return num(d.month)
        if c == "d":
            return num(d.day)
        if c == "H":
            return num(d.hour)
        if c == "k":
            return num(d.hour or 24)
        if c == "K":
            return num(d.hour % 12)
        if c == "h":
            return num(d.hour % 12 or 12)
        if c == "m":
            return num(d.minute)
        if c == "s":
            return num(d.second)
        if c == "S":
            return num(d.microsecond // 1000)
        if c == "E":
            return _DAYS[d.weekday()] if n >= 4 else _DAYS[d.weekday()][:3]
        if c == "a":
            return "AM" if d.hour < 12 else "PM"
        if c == "D":
            return num(d.timetuple().tm_yday)
        if c == "u":
            return num(d.isoweekday())
        if c == "z":
            return "Coordinated Universal Time" if n >= 4 else "UTC"
        if c == "Z":
            return "+0000"
        return "Z"  # X: ISO 8601 zone, Z for UTC

    # ---- parsing ----------------------------------------------------------------------------
    def _regex(self) -> re.Pattern[str]:
        parts: list[str] = []
        for i, t in enumerate(self.tokens):
            if not t.letter:
                parts.append(re.escape(t.text))
                continue
            nxt = self.tokens[i + 1] if i + 1 < len(self.tokens) else None
            c = t.letter
            if t.numeric:
                # abutting numeric fields take exactly their width, as Java parses them
                body = rf"\d{{{t.count}}}" if nxt is not None and nxt.numeric else r"[+-]?\d+"
            elif c in "ML":
                body = "|".join(sorted(_MONTHS + [m[:3] for m in _MONTHS], key=len, reverse=True))
            elif c == "E":
                body = "|".join(sorted(_DAYS + [d[:3] for d in _DAYS], key=len, reverse=True))
            elif c == "a":
                body = "AM|PM"
            elif c == "G":
                body = "AD|BC"
            else:  # zones
                body = r"Z|[+-]\d{2}:?(?:\d{2})?|(?:GMT|UTC)(?:[+-]\d{2}:?\d{2})?|Coordinated Universal Time"
            parts.append(f"(?P<g{i}>{body})")
        return re.compile("".join(parts), re.IGNORECASE)

    def parse(self, text: str) -> datetime.datetime:
        """The UTC instant `text` denotes; ValueError when it does not match the pattern.
        Like Java's parse, text after the pattern is ignored."""
        m = self._regex().match(text)
        if m is None:
            raise ValueError(f'Unparseable date: "{text}"')
        fields: dict[str, int] = {}
        pm: bool | None = None
        offset = datetime.timedelta(0)
        for i, t in enumerate(self.tokens):
            raw = m.group(f"g{i}") if t.letter else None
            if raw is None:
                continue
            c = t.letter
            if c in "ML" and t.count >= 3:
                fields["M"] = next(k for k, name in enumerate(_MONTHS, 1)
                                   if name.lower().startswith(raw.lower()[:3]))
            elif c == "a":
                pm = raw.upper() == "PM"
            elif c in "zZX":
                offset = _offset(raw)
            elif c in "EG":
                continue
            elif c in "yY":
                year = int(raw)
                if t.count <= 2 and len(raw) == 2:
                    year += 2000 if year < 80 else 1900  # a simplified 80-20 century window
                fields["y"] = year
            else:
                fields["M" if c == "L" else c] = int(raw)
        hour = fields["H"] if "H" in fields else fields.get("k", 0) % 24
        if "h" in fields or "K" in fields:
            hour = fields["h"] % 12 if "h" in fields else fields["K"]
            if pm:
                hour += 12
        try:
            base = datetime.datetime(fields.get("y", 1970), 1, 1, tzinfo=datetime.UTC)
            if "D" in fields and "d" not in fields and "M" not in fields:
                base += datetime.timedelta(days=fields["D"] - 1)
            else:
                base = base.replace(month=fields.get("M", 1))
                base += datetime.timedelta(days=fields.get("d", 1) - 1)
            return base + datetime.timedelta(hours=hour, minutes=fields.get("m", 0),
                                             seconds=fields.get("s", 0),
                                             milliseconds=fields.get("S", 0)) - offset
        except (ValueError, OverflowError) as e:
            raise ValueError(f'Unparseable date: "{text}": {e}') from None


def _offset(raw: str) -> datetime.timedelta:
    if raw.upper() in ("Z", "UTC", "GMT", "COORDINATED UNIVERSAL TIME"):
        return datetime.timedelta(0)
    m = re.fullmatch(r"(?:GMT|UTC)?([+-])(\d{2}):?(\d{2})?", raw, re.IGNORECASE)
    if m is None:
        raise ValueError(f"unknown time zone {raw}")
    delta = datetime.timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0))
    return -delta if m.group(1) == "-" else delta
