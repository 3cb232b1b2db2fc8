"""Text forms Java writes, so bytes match Kafka's: Double.toString / Float.toString for floats
(shortest round-tripping digits; plain between 1e-3 and 1e7, else `d.dddE±n`), BigDecimal's
toString, and a compact JSON writer with Jackson's escaping (upper-case \\u00XX)."""

from __future__ import annotations

import base64
import decimal
import math
import struct
from typing import Any


class Float32(float):
    """A float that Java would hold as a `float` (written with Float.toString's digits)."""


def _shortest32(x: float) -> str:
    packed = struct.pack(">f", x)
    for p in range(1, 10):
        text = f"{x:.{p - 1}e}"
        if struct.pack(">f", float(text)) == packed:
            return text
    return repr(x)


def java_double(x: float, *, float32: bool = False) -> str:
    """Java's Double.toString (or Float.toString with float32=True) of x."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    text = _shortest32(x) if float32 else repr(x)
    sign, digits, exp = decimal.Decimal(text).normalize().as_tuple()
    assert isinstance(exp, int)
    ds = "".join(map(str, digits))
    e10 = len(ds) + exp - 1  # exponent of the first digit
    neg = "-" if sign else ""
    if 1e-3 <= abs(x) < 1e7:
        if e10 >= 0:
            whole = ds[: e10 + 1].ljust(e10 + 1, "0")
            frac = ds[e10 + 1:] or "0"
        else:
            whole, frac = "0", "0" * (-e10 - 1) + ds
        return f"{neg}{whole}.{frac}"
    return f"{neg}{ds[0]}.{ds[1:] or '0'}E{e10}"


_ESC = {i: f"\\u{i:04X}" for i in range(0x20)}
_ESC.update({ord("\b"): "\\b", ord("\t"): "\\t", ord("\n"): "\\n", ord("\f"): "\\f",
             ord("\r"): "\\r", ord('"'): '\\"', ord("\\"): "\\\\"})


def json_string(s: str) -> str:
    return '"' + s.translate(_ESC) + '"'


def write_json(node: Any) -> str:
    """Compact JSON as Jackson writes it. Float32 / float / Decimal keep Java's number text;
    bytes are written as base64 strings (Jackson's binary nodes); NaN/Infinity quoted."""
    out: list[str] = []
    _write(node, out)
    return "".join(out)


def _write(node: Any, out: list[str]) -> None:
    if node is None:
        out.append("null")
    elif node is True:
        out.append("true")
    elif node is False:
        out.append("false")
    elif isinstance(node, str):
        out.append(json_string(node))
    elif isinstance(node, int):
        out.append(str(node))
    elif isinstance(node, float):
        text = java_double(node, float32=isinstance(node, Float32))
        out.append(text if math.isfinite(node) else f'"{text}"')
    elif isinstance(node, decimal.Decimal):
        out.append(str(node))
    elif isinstance(node, bytes | bytearray | memoryview):
        out.append('"' + base64.b64encode(bytes(node)).decode() + '"')
    elif isinstance(node, dict):
        out.append("{")
        first = True
        for k, v in node.items():
            if not first:
                out.append(",")
            first = False
            out.append(json_string(str(k)))
            out.append(":")
            _write(v, out)
        out.append("}")
    elif isinstance(node, list | tuple):
        out.append("[")
        for i, v in enumerate(node):
            if i:
                out.append(",")
            _write(v, out)
        out.append("]")
    else:
        raise TypeError(f"cannot write {type(node).__name__} as JSON")
