"""The console's user journey of issue 18 in a real headless Chromium: register a Protobuf schema,
create a topic, produce a Protobuf record through the schema-aware form and find it decoded, watch
a consumer group's lag fall to zero, reset its offsets after a dry run, edit a topic config and
see an incompatible schema refused. Screenshots of every page: build/test-artifacts/console/."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from .conftest import shot

pytestmark = pytest.mark.browser

PROTO_V1 = """syntax = "proto3";
package shop;

message Order {
  string order_id = 1;
  int64 amount_cents = 2;
  Status status = 3;
  enum Status {
    NEW = 0;
    PAID = 1;
    SHIPPED = 2;
  }
}
"""
PROTO_V2 = PROTO_V1.replace("  Status status = 3;\n", "  Status status = 3;\n  string note = 4;\n")
PROTO_INCOMPATIBLE = PROTO_V2.replace("int64 amount_cents = 2;", "string amount_cents = 2;")
TOPIC = "journey"
GROUP = "journey-group"
PLAIN_RECORDS = 20
TOTAL = PLAIN_RECORDS + 2  # the Protobuf record, the tailed one and the plain ones
WAIT_S = 45


def _wait(driver: Any, cond: Any, what: str = "", timeout: float = WAIT_S) -> Any:
    """WebDriverWait; on a timeout, a screenshot of the page (failed-<what>.png) and the step's name.

    Pages that refresh themselves replace their elements between finding one and reading it, so a
    stale element is one more poll, not a failure."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(
            driver, timeout, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)
        ).until(cond)
    except TimeoutException:
        shot(driver, f"failed-{what or 'wait'}")
        raise AssertionError(f"timed out after {timeout}s waiting for {what or cond}") from None


def _text(driver: Any, css: str) -> str:
    """The element's text; found again if the page's own refresh replaced it in between."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    for _ in range(4):
        try:
            return str(driver.find_element(By.CSS_SELECTOR, css).text)
        except StaleElementReferenceException:
            continue
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def _fill(driver: Any, form_css: str, values: dict[str, str]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    form = driver.find_element(By.CSS_SELECTOR, form_css)
    for name, value in values.items():
        el = form.find_element(By.NAME, name)
        if el.tag_name == "select":
            Select(el).select_by_value(value)
        else:
            el.clear()
            el.send_keys(value)


def _submit(driver: Any, form_css: str, button_text: str | None = None) -> None:
    from selenium.webdriver.common.by import By

    form = driver.find_element(By.CSS_SELECTOR, form_css)
    buttons = form.find_elements(By.TAG_NAME, "button")
    button = next(b for b in buttons if button_text is None or b.text == button_text)
    old = driver.find_element(By.TAG_NAME, "html")
    # a scripted click: a native one can race the page's 2 s refresh of its live region
    # (chromedriver then loses the node: "Node with given id does not belong to the document")
    driver.execute_script("arguments[0].click()", button)
    from selenium.webdriver.support import expected_conditions as ec

    _wait(driver, ec.staleness_of(old), f"submit-{button_text}")


def _notice(driver: Any) -> str:
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.CSS_SELECTOR, "p.notice")
    return str(found[0].text) if found else ""


def _error(driver: Any) -> str:
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.CSS_SELECTOR, "p.error")
    return str(found[0].text) if found else ""


def _consume_all(bootstrap: str, stop: threading.Event, done: threading.Event) -> None:
    """A group member that reads everything, commits, and stays until told to stop."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    try:
        c.subscribe([TOPIC])
        seen = 0
        while not stop.is_set():
            msgs = c.consume(100, 0.3)
            seen += len([m for m in msgs if m.error() is None])
            if msgs:
                c.commit(asynchronous=False)
            if seen >= TOTAL:
                done.set()
    finally:
        c.close()


def test_user_journey(stack: dict[str, Any], browser: Any) -> None:
    from selenium.webdriver.common.by import By

    d, base, bootstrap = browser, stack["console"], stack["broker"].bootstrap

    # 1. the overview answers with the cluster's one broker
    d.get(base + "/")
    assert _text(d, '[data-card="Brokers"]') == "1"
    shot(d, "01-overview")

    # 2. register the Protobuf schema of the topic's values
    d.get(base + "/schemas")
    _fill(d, "form.register", {"subject": f"{TOPIC}-value", "schemaType": "PROTOBUF", "schema": PROTO_V1})
    _submit(d, "form.register", "Register")
    assert "registered under journey-value" in _notice(d), _error(d)

    # 3. create the topic
    d.get(base + "/topics")
    _fill(d, "main form", {"name": TOPIC, "partitions": "2"})
    _submit(d, "main form", "Create topic")
    assert "created topic journey" in _notice(d), _error(d)
    assert len(d.find_elements(By.CSS_SELECTOR, "table tbody tr")) >= 2  # the partitions table
    shot(d, "02-topic")

    # 4. produce a Protobuf record through the schema-aware form (fields from the schema)
    d.get(base + f"/topics/{TOPIC}/produce")
    assert d.find_element(By.NAME, "f.status").tag_name == "select"  # the enum became a choice
    _fill(d, "form.produce", {"key": "o-42", "f.order_id": "o-42", "f.amount_cents": "1999",
                              "f.status": "PAID", "partition": "0"})
    shot(d, "03-produce-form")
    _submit(d, "form.produce", "Produce")
    assert "produced to partition 0 at offset 0" in _notice(d), _error(d)

    # 5. the record is found decoded by its registry schema
    d.get(base + f"/topics/{TOPIC}/messages?mode=beginning")
    value_cell = d.find_element(By.CSS_SELECTOR, "#records tbody tr td:nth-child(5)")
    assert value_cell.find_element(By.CSS_SELECTOR, ".kind").text == "protobuf"
    decoded = json.loads(value_cell.find_element(By.TAG_NAME, "pre").text)
    assert decoded == {"order_id": "o-42", "amount_cents": "1999", "status": "PAID"}
    shot(d, "04-messages-decoded")

    # ... and a search for a value field's text finds it too
    d.get(base + f"/topics/{TOPIC}/messages?mode=beginning&search=o-42")
    assert len(d.find_elements(By.CSS_SELECTOR, "#records tbody tr .kind.protobuf")) == 1

    # ... and the live tail shows a record produced while the page is open
    d.get(base + f"/topics/{TOPIC}/messages")
    d.find_element(By.ID, "tail").click()
    _wait(d, lambda drv: _text(drv, "#tail-status").startswith("live"), "tail-open")
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(TOPIC, key=b"tail", value=b"tailed record 1", partition=1)
    assert p.flush(15) == 0
    _wait(d, lambda drv: "tailed record 1" in _text(drv, "#records tbody"), "tail-record")
    assert len(d.find_elements(By.CSS_SELECTOR, "#records tbody tr.tailed")) == 1
    shot(d, "05-live-tail")
    d.find_element(By.ID, "tail").click()  # stop

    # 6. a consumer group's lag, watched falling to zero
    for i in range(PLAIN_RECORDS):
        p.produce(TOPIC, key=f"k{i}".encode(), value=f"plain {i}".encode(), partition=i % 2)
    assert p.flush(15) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        GROUP, [TopicPartition(TOPIC, 0, 0), TopicPartition(TOPIC, 1, 0)])])[GROUP].result(15)
    d.get(base + f"/groups/{GROUP}")
    assert _text(d, "#total-lag") == str(TOTAL)
    shot(d, "06-group-lag")
    stop, done = threading.Event(), threading.Event()
    member = threading.Thread(target=_consume_all, args=(bootstrap, stop, done), daemon=True)
    member.start()
    try:
        _wait(d, lambda drv: _text(drv, "#total-lag") == "0", "lag-zero")  # the page refreshes itself
        assert done.wait(WAIT_S)
        shot(d, "07-group-lag-zero")
    finally:
        stop.set()
        member.join(20)
    _wait(d, lambda drv: _text(drv, "#group-state") == "EMPTY", "group-empty")

    # 7. reset the group's offsets: a dry run first (nothing committed), then for real
    _fill(d, "form.reset", {"topic": TOPIC, "strategy": "earliest"})
    _submit(d, "form.reset", "Preview (dry run)")
    assert "Preview" in _text(d, "#preview-title")
    new = [r.find_elements(By.TAG_NAME, "td")[3].text
           for r in d.find_elements(By.CSS_SELECTOR, "table.preview tbody tr")]
    assert new == ["0", "0"]
    assert _text(d, "#total-lag") == "0"  # the dry run committed nothing
    shot(d, "08-reset-preview")
    _fill(d, "form.reset", {"topic": TOPIC, "strategy": "earliest"})
    _submit(d, "form.reset", "Reset offsets")
    assert "reset" in _notice(d), _error(d)
    assert _text(d, "#total-lag") == str(TOTAL)

    # 8. edit a topic config
    d.get(base + f"/topics/{TOPIC}")
    _fill(d, "form.edit-config", {"key": "retention.ms", "value": "3600000"})
    _submit(d, "form.edit-config", "Save config")
    assert "retention.ms set to 3600000" in _notice(d), _error(d)
    res = ConfigResource(ResourceType.TOPIC, TOPIC)
    configs = admin.describe_configs([res])[res].result(15)
    assert configs["retention.ms"].value == "3600000"

    # 9. a compatible new version is registered and diffed against the first; an incompatible one
    # is refused, with the registry's reason
    d.get(base + f"/schemas/{TOPIC}-value")
    _fill(d, "form.register", {"schema": PROTO_V2})
    _submit(d, "form.register", "Register")
    assert f"registered under {TOPIC}-value" in _notice(d), _error(d)
    d.get(base + f"/schemas/{TOPIC}-value?a=1&b=2")
    added = [e.text for e in d.find_elements(By.CSS_SELECTOR, "pre.diff .add")]
    assert added == ["+  string note = 4;"], added
    shot(d, "09-schema-diff")
    _fill(d, "form.register", {"schema": PROTO_INCOMPATIBLE})
    _submit(d, "form.register", "Register")
    refusal = _error(d)
    assert "Refused by the schema registry" in refusal and "incompatible" in refusal.lower(), refusal
    shot(d, "09-schema-refused")
    versions = json.loads(_registry_get(stack["registry"], f"/subjects/{TOPIC}-value/versions"))
    assert versions == [1, 2]

    # 10. the overview now counts the journey's topic and records
    d.get(base + "/")
    assert int(_text(d, '[data-card="Topics"]')) >= 2
    shot(d, "10-overview")

    # every other page, for the record
    for name, path in (("11-topics", "/topics"), ("12-groups", "/groups"), ("13-schemas", "/schemas"),
                       ("15-connect", "/connect"),
                       ("16-security", "/security")):
        d.get(base + path)
        assert not _error(d), (path, _error(d))
        shot(d, name)

    # 11. a path that does not exist: a plain page, no stack trace
    d.get(base + "/topics/journey/nonsense/path")
    assert "There is no page at" in _error(d)
    assert "Traceback" not in d.page_source
    shot(d, "17-not-found")


def _registry_get(url: str, path: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url + path, timeout=10) as r:
        return str(r.read().decode())
