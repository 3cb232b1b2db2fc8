"""ssl.principal.mapping.rules: Kafka's rule syntax and its examples."""

from __future__ import annotations

import pytest

from samsa.security.ssl_principal import NoMatchingRule, SslPrincipalMapper

DN = "CN=kafka-client,OU=eng,O=acme,L=Paris,C=FR"


def test_default_is_the_dn() -> None:
    assert SslPrincipalMapper.parse("DEFAULT").name(DN) == DN
    assert SslPrincipalMapper.parse("").name(DN) == DN


@pytest.mark.parametrize(("rules", "expected"), [
    # Kafka docs' examples
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", DN),
    ("RULE:^CN=(.*?),OU=eng.*$/$1/,DEFAULT", "kafka-client"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),C=(.*?)$/$1@$2/L", "kafka-client@eng"),
    ("RULE:^.*[Cc][Nn]=([a-zA-Z0-9.-]*).*$/$1/U", "KAFKA-CLIENT"),
    ("RULE:^CN=([^,]*),.*$/User-$1/,RULE:^.*$/nobody/", "User-kafka-client"),
    # escaped slashes in pattern and replacement
    ("RULE:^CN=(.*?),OU=(.*?),.*$/$2\\/$1/", "eng/kafka-client"),
    # spaces and new lines between rules
    ("RULE:^nomatch$/x/,\n  RULE:^CN=([^,]*),.*$/$1/L", "kafka-client"),
])
def test_rules(rules: str, expected: str) -> None:
    assert SslPrincipalMapper.parse(rules).name(DN) == expected


def test_no_rule_matches() -> None:
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper.parse("RULE:^CN=admin,.*$/admin/").name(DN)


@pytest.mark.parametrize("bad", ["RULE:^CN=(.*)$", "RULE:^CN=(.*)$/$1", "NOTARULE",
                                 "RULE:^(.*$/$1/", "DEFAULTX", "RULE:a/b/Q"])
def test_invalid_rules(bad: str) -> None:
    with pytest.raises(ValueError):
        SslPrincipalMapper.parse(bad)
