"""The runtime's connector validation (what PUT /connector-plugins/{type}/config/validate answers)
with transforms and predicates: per-alias keys, groups and errors come from enrich_config_def."""

from __future__ import annotations

import pytest

from samsa.connect.plugins import Plugins

validation = pytest.importorskip("samsa.connect.runtime.validation")

T = "org.apache.kafka.connect.transforms."


@pytest.fixture(scope="module")
def plugins() -> Plugins:
    return Plugins()


def test_validate_reports_transform_keys_by_group(plugins, tmp_path):
    props = {"name": "src", "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
             "topic": "t", "file": str(tmp_path / "in.txt"),
             "transforms": "route,mask", "transforms.route.type": T + "RegexRouter",
             "transforms.route.regex": "(", "transforms.mask.type": T + "MaskField$Value",
             "transforms.mask.predicate": "nope",
             "predicates": "tomb", "predicates.tomb.type": T + "predicates.RecordIsTombstone"}
    result = validation.validate_connector_config(plugins, props, override_policy="All",
                                                  exactly_once_source=False)
    assert {"Transforms: route", "Transforms: mask", "Predicates: tomb"} <= set(result["groups"])
    by_name = {c["value"]["name"]: c for c in result["configs"]}
    assert by_name["transforms.route.type"]["definition"]["group"] == "Transforms: route"
    assert by_name["transforms.route.type"]["value"]["errors"] == []
    assert by_name["transforms.route.regex"]["value"]["errors"]
    assert any("Missing required configuration" in e
               for e in by_name["transforms.route.replacement"]["value"]["errors"])
    assert any("Missing required configuration" in e
               for e in by_name["transforms.mask.fields"]["value"]["errors"])
    assert any("Predicate alias nope is not defined" in e
               for e in by_name["transforms.mask.predicate"]["value"]["errors"])
    assert by_name["predicates.tomb.type"]["value"]["errors"] == []
    assert result["error_count"] == 4


def test_validate_clean_transform_config_has_no_errors(plugins, tmp_path):
    props = {"name": "src", "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
             "topic": "t", "file": str(tmp_path / "in.txt"),
             "transforms": "hoist", "transforms.hoist.type": T + "HoistField$Value",
             "transforms.hoist.field": "line"}
    result = validation.validate_connector_config(plugins, props, override_policy="All",
                                                  exactly_once_source=False)
    assert result["error_count"] == 0, validation.errors_of(result)
    by_name = {c["value"]["name"]: c for c in result["configs"]}
    assert by_name["transforms.hoist.field"]["value"]["value"] == "line"
