"""SCRAM users from the console, in a real headless Chromium, on a SASL_SSL broker with the
StandardAuthorizer (SecureBroker): an admin signs in (SASL/PLAIN) and sets a credential through the
form; a real client (confluent-kafka) then logs in as that user with SCRAM; a changed password
locks the old one out; a deleted credential no longer logs in; a user without ALTER on the cluster
gets the broker's refusal as a page; bad input gets a clear 400 page. The password is never shown
back (pages, notices, errors) nor logged."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from samsa.console.context import ConsoleContext
from samsa.testing.secure import SecureBroker

from .conftest import ARTIFACTS, shot
from .consoleserver import ConsoleServer
from .test_console_journey import _error, _fill, _notice, _submit, _wait

ADMIN, ALICE = ("admin", "admin-secret"), ("alice", "alice-secret")
PW1, PW2, PW512 = "carol-first-Pw!", "carol-second-Pw?", "carol-512-pw"
LOGIN_S = 20.0


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with SecureBroker(tmp_path_factory.mktemp("scram-console"), acls=True) as sb:
        props = {k: v for k, v in sb.java("admin").items() if k != "sasl.jaas.config"}
        with ConsoleServer(ConsoleContext(sb.sasl_ssl, props)) as console:
            yield {"sb": sb, "console": console.url}


def _can_login(sb: SecureBroker, user: str, mechanism: str, password: str) -> bool:
    """Whether the broker accepts these SCRAM credentials: a metadata request answered, or the
    client's authentication error (librdkafka reports a refused login through error_cb)."""
    refused: list[Any] = []

    def on_error(err: Any) -> None:
        if err.code() == KafkaError._AUTHENTICATION:
            refused.append(err)
    conf: dict[str, Any] = {"bootstrap.servers": sb.sasl_ssl,
                            **sb.librdkafka(user, mechanism, password=password), "error_cb": on_error}
    admin = AdminClient(conf)
    deadline = time.monotonic() + LOGIN_S
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=1)
            return True
        except Exception:  # noqa: BLE001 - not answered yet; the error callback decides
            admin.poll(0)
            if refused:
                return False
    raise AssertionError(f"neither a login nor a refusal for {user} within {LOGIN_S}s")


def _users(sb: SecureBroker) -> dict[str, list[tuple[str, int]]]:
    """The credentials the broker holds, as its super user on PLAINTEXT (always allowed)."""
    admin = AdminClient({"bootstrap.servers": sb.plaintext})
    fut: Any = admin.describe_user_scram_credentials(request_timeout=10)
    res = fut.result(timeout=15)
    return {u: sorted((i.mechanism.name, i.iterations) for i in d.scram_credential_infos)
            for u, d in res.items()}


def _sign_in(d: Any, url: str, who: tuple[str, str]) -> None:
    d.get(url + "/logout")
    d.get(url + "/security")
    assert "/login" in d.current_url
    _fill(d, "form[action='/login']", {"username": who[0], "password": who[1]})
    _submit(d, "form[action='/login']")


def _set(d: Any, values: dict[str, str], validate: bool = True) -> None:
    from selenium.webdriver.common.by import By

    form = "form.set-scram"
    if validate:
        _fill(d, form, values)
    else:  # what a client without the browser's checks (required, min/max, maxlength) sends
        el = d.find_element(By.CSS_SELECTOR, form)
        d.execute_script("arguments[0].noValidate = true", el)
        for name, value in values.items():
            d.execute_script("const i = arguments[0]; if (i.type === 'number') i.type = 'text'; "
                             "i.value = arguments[1]", el.find_element(By.NAME, name), value)
    _submit(d, form, "Set credential")


def _delete(d: Any, user: str, mechanism: str, accept: bool) -> None:
    """Click the credential's Delete button and answer the confirmation prompt."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    forms = d.find_elements(By.CSS_SELECTOR, "form[action='/security/users/delete']")
    form = next(f for f in forms
                if f.find_element(By.NAME, "user").get_attribute("value") == user
                and f.find_element(By.NAME, "mechanism").get_attribute("value") == mechanism)
    old = d.find_element(By.TAG_NAME, "html")
    d.execute_script("const b = arguments[0]; setTimeout(() => b.click(), 0)",
                     form.find_element(By.TAG_NAME, "button"))
    alert = _wait(d, ec.alert_is_present(), "delete-confirm")
    assert user in alert.text and mechanism in alert.text
    if accept:
        alert.accept()
        _wait(d, ec.staleness_of(old), "delete-submitted")
    else:
        alert.dismiss()


@pytest.mark.browser
def test_scram_users_from_the_console(secure: dict[str, Any], browser: Any,
                                      caplog: pytest.LogCaptureFixture) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    caplog.set_level(logging.DEBUG, logger="samsa")
    caplog.set_level(logging.DEBUG, logger="uvicorn")
    sb, url, d = secure["sb"], secure["console"], browser
    _sign_in(d, url, ADMIN)
    assert d.current_url.endswith("/security"), d.current_url
    pw = d.find_element(By.CSS_SELECTOR, "form.set-scram input[name=password]")
    assert pw.get_attribute("type") == "password"
    iters = d.find_element(By.CSS_SELECTOR, "form.set-scram input[name=iterations]")
    assert iters.get_attribute("value") == "4096"
    assert (iters.get_attribute("min"), iters.get_attribute("max")) == ("4096", "16384")

    # create carol (SCRAM-SHA-256, the default 4096 iterations) through the form
    assert not _can_login(sb, "carol", "SCRAM-SHA-256", PW1)
    _set(d, {"user": "carol", "mechanism": "SCRAM-SHA-256", "password": PW1})
    assert _notice(d) == "SCRAM-SHA-256 credential set for carol", _error(d)
    assert PW1 not in d.page_source
    assert _users(sb)["carol"] == [("SCRAM_SHA_256", 4096)]
    assert _can_login(sb, "carol", "SCRAM-SHA-256", PW1)
    assert not _can_login(sb, "carol", "SCRAM-SHA-256", PW2)

    # change the password: the old one stops working, the new one works
    _set(d, {"user": "carol", "mechanism": "SCRAM-SHA-256", "password": PW2})
    assert _notice(d) == "SCRAM-SHA-256 credential set for carol", _error(d)
    assert not _can_login(sb, "carol", "SCRAM-SHA-256", PW1)
    assert _can_login(sb, "carol", "SCRAM-SHA-256", PW2)

    # a second mechanism with more iterations, listed with its own row
    _set(d, {"user": "carol", "mechanism": "SCRAM-SHA-512", "password": PW512, "iterations": "8192"})
    assert _users(sb)["carol"] == [("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 8192)]
    rows = [r.text for r in d.find_elements(By.CSS_SELECTOR, "tr") if r.text.startswith("carol")]
    assert any("SCRAM-SHA-512" in r and "8192" in r for r in rows), rows
    assert any("SCRAM-SHA-256" in r and "4096" in r for r in rows), rows
    shot(d, "20-scram-users")
    d.execute_script("arguments[0].scrollIntoView()", d.find_element(By.CSS_SELECTOR, "form.set-scram"))
    d.save_screenshot(str(ARTIFACTS / "20-scram-set-form.png"))

    # delete SCRAM-SHA-256: a dismissed prompt deletes nothing; confirmed, that login fails
    _delete(d, "carol", "SCRAM-SHA-256", accept=False)
    assert len(_users(sb)["carol"]) == 2
    _delete(d, "carol", "SCRAM-SHA-256", accept=True)
    assert _notice(d) == "SCRAM-SHA-256 credential of carol deleted", _error(d)
    assert _users(sb)["carol"] == [("SCRAM_SHA_512", 8192)]
    assert not _can_login(sb, "carol", "SCRAM-SHA-256", PW2)
    assert _can_login(sb, "carol", "SCRAM-SHA-512", PW512)

    # bad input, past the browser's own checks: a 400 page saying what is wrong
    secret = "never-shown-pw"
    for values, words in [
        ({"user": "", "password": secret}, "needs a user name"),
        ({"user": "dave", "password": secret, "iterations": "100"}, "between 4096 and 16384"),
        ({"user": "dave", "password": secret, "iterations": "16385"}, "between 4096 and 16384"),
        ({"user": "dave", "password": secret, "iterations": "9" * 5000}, "between 4096 and 16384"),
        ({"user": "dave", "password": secret, "iterations": "many"}, "whole number"),
        ({"user": "dave", "password": ""}, "password must not be empty"),
        ({"user": "d" * 5000, "password": secret}, "longer than 256"),
    ]:
        d.get(url + "/security")
        _set(d, values, validate=False)
        err = _error(d)
        assert words in err, (values.get("iterations"), err)
        assert secret not in d.page_source and "Traceback" not in d.page_source
        if values.get("iterations") == "100":
            shot(d, "21-scram-bad-input")
    assert "dave" not in _users(sb)

    # alice may describe the cluster (an ACL the admin adds here) but not alter it: the
    # broker refuses her change and the page says so
    d.get(url + "/security")
    _fill(d, "form.add-acl", {"principal": "User:alice", "operation": "DESCRIBE",
                              "resourceType": "CLUSTER", "name": "kafka-cluster"})
    _submit(d, "form.add-acl", "Add ACL")
    assert "ACL added" in _notice(d), _error(d)
    rows = [r.text for r in d.find_elements(By.CSS_SELECTOR, "tr") if "kafka-cluster" in r.text]
    assert len(rows) == 1 and "CLUSTER" in rows[0] and "User:alice" in rows[0], rows
    _sign_in(d, url, ALICE)
    assert d.current_url.endswith("/security") and "carol" in d.page_source
    _set(d, {"user": "mallory", "mechanism": "SCRAM-SHA-512", "password": secret})
    err = _error(d)
    assert "cannot set the SCRAM-SHA-512 credential of 'mallory'" in err and \
        "authorization failed" in err.lower(), err
    assert d.find_element(By.TAG_NAME, "h1").text == "Not allowed"
    assert secret not in d.page_source and "Traceback" not in d.page_source
    shot(d, "22-scram-refused")
    d.get(url + "/security")
    _delete(d, "carol", "SCRAM-SHA-512", accept=True)
    assert "authorization failed" in _error(d).lower()
    assert "mallory" not in _users(sb) and _users(sb)["carol"] == [("SCRAM_SHA_512", 8192)]

    logged = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records
                       if not r.name.startswith(("selenium", "urllib3")))  # the test's own typing
    # the admin removes alice's cluster ACL (its Remove button, confirmed): she is refused again
    _sign_in(d, url, ADMIN)
    old = d.find_element(By.TAG_NAME, "html")
    acl = next(f for f in d.find_elements(By.CSS_SELECTOR, "form[action='/security/acls/delete']")
                  if f.find_element(By.NAME, "name").get_attribute("value") == "kafka-cluster")
    d.execute_script("arguments[0].removeAttribute('data-confirm'); arguments[0].submit()", acl)
    _wait(d, ec.staleness_of(old), "acl-removed")
    assert "ACL removed" in _notice(d), _error(d)
    _sign_in(d, url, ALICE)
    assert d.find_element(By.TAG_NAME, "h1").text == "Not allowed"

    for text in (PW1, PW2, PW512, secret):
        assert text not in logged


def test_scram_forms_over_http(secure: dict[str, Any]) -> None:
    """Without a browser: a form posted from another site's page is refused as the console's
    other forms are; huge and unknown values and a missing credential get clear pages."""
    sb, url = secure["sb"], secure["console"]
    with httpx.Client(base_url=url, timeout=30) as admin:
        r = admin.post("/login", data={"username": ADMIN[0], "password": ADMIN[1], "next": "/security"})
        assert r.status_code == 303
        form = {"user": "eve", "mechanism": "SCRAM-SHA-256", "password": "eve-pw", "iterations": "4096"}
        r = admin.post("/security/users", data=form, headers={"Origin": "http://evil.example"})
        assert r.status_code == 403 and "another site" in r.text
        r = admin.post("/security/users/delete", data={"user": "admin", "mechanism": "SCRAM-SHA-256"},
                       headers={"Origin": "http://evil.example"})
        assert r.status_code == 403
        assert "eve" not in _users(sb) and ("SCRAM_SHA_256", 4096) in _users(sb)["admin"]

        for bad, status, words in [
            ({**form, "mechanism": "SCRAM-SHA-1"}, 400, "unknown SCRAM mechanism"),
            ({**form, "password": "p" * 200_000}, 400, "longer than 1024"),
            ({**form, "iterations": "-4096"}, 400, "between 4096 and 16384"),
            ({**form, "iterations": "2147483647"}, 400, "between 4096 and 16384"),
        ]:
            r = admin.post("/security/users", data=bad)
            assert r.status_code == status and words in r.text, (r.status_code, r.text[-500:])
            assert "Traceback" not in r.text and "p" * 2000 not in r.text
        r = admin.post("/security/users", data={**form, "password": "x" * (2 << 20)})
        assert r.status_code == 413
        r = admin.post("/security/users/delete", data={"user": "nobody", "mechanism": "SCRAM-SHA-512"})
        assert r.status_code == 404 and "does not exist" in r.text, r.text[-500:]
        r = admin.post("/security/users/delete", data={"user": "", "mechanism": "SCRAM-SHA-512"})
        assert r.status_code == 400 and "needs a user name" in r.text
        # the session's client still works after all of that
        r = admin.post("/security/users", data=form)
        assert r.status_code == 303 and "eve" in _users(sb)
