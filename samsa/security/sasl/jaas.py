"""Kafka's JAAS-style `sasl.jaas.config` value: `<LoginModule class> <flag> key="value" ...;`.
Only the options matter to a broker (PLAIN users `user_<name>="pw"`, OAUTHBEARER validator
options); the module class says which mechanism the entry is for."""

from __future__ import annotations

import re

from samsa.config import ConfigError

_HEAD = re.compile(r"\s*([A-Za-z_$][\w.$]*)\s+(required|requisite|sufficient|optional)\s*", re.I)
_OPT = re.compile(r"\s*([^\s=;]+)\s*=\s*(\"((?:[^\"\\]|\\.)*)\"|([^\s\";]+))\s*")


def parse_jaas(value: str) -> tuple[str, dict[str, str]]:
    """(login module class, options) of a one-entry JAAS config; ConfigError if malformed."""
    m = _HEAD.match(value)
    if m is None:
        raise ConfigError(f"Invalid JAAS config: expected '<LoginModule> <flag> key=value ...;' "
                          f"in {value[:60]!r}")
    pos = m.end()
    opts: dict[str, str] = {}
    while pos < len(value) and value[pos] != ";":
        o = _OPT.match(value, pos)
        if o is None:
            raise ConfigError(f"Invalid JAAS config: cannot parse option at {value[pos:pos + 30]!r}")
        raw = o.group(3) if o.group(3) is not None else o.group(4)
        opts[o.group(1)] = re.sub(r"\\(.)", r"\1", raw)
        pos = o.end()
    if value[pos:pos + 1] != ";" or value[pos + 1:].strip():
        raise ConfigError("Invalid JAAS config: the entry must end with ';'")
    return m.group(1), opts
