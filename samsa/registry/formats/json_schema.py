"""JSON Schema: validated against its draft's metaschema (jsonschema), references resolved by
$ref URI (the reference name) or JSON pointer. Compatibility asks whether every document the
writer schema accepts is accepted by the reader schema, with Confluent's open/closed content
model rules for properties."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from . import Dependency, InvalidSchema, ParsedSchema


class JsonSchema:
    schema_type = "JSON"

    def __init__(self, raw: Any, deps: dict[str, Any], normalize: bool) -> None:
        self.raw = raw
        self.deps = deps
        self._canonical = json.dumps(raw, separators=(",", ":"), sort_keys=normalize)

    def canonical(self) -> str:
        return self._canonical

    def identity(self) -> str:
        return self._canonical

    def compatibility(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, JsonSchema):
            return [f"schema type changed from {writer.schema_type} to JSON"]
        c = _Checker(self, writer)
        c.check(self.raw, writer.raw, "#")
        return c.out


def _load(text: str, what: str) -> Any:
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise InvalidSchema(f"Invalid JSON schema{what}: not valid JSON ({e})") from None
    if not isinstance(raw, (dict, bool)):
        raise InvalidSchema(f"Invalid JSON schema{what}: a schema is an object or a boolean")
    try:
        cls = jsonschema.validators.validator_for(raw, default=jsonschema.Draft7Validator)
        cls.check_schema(raw)
    except jsonschema.exceptions.SchemaError as e:
        raise InvalidSchema(f"Invalid JSON schema{what}: {e.message} at "
                            f"#/{'/'.join(str(p) for p in e.absolute_path)}") from None
    return raw


def parse(text: str, deps: list[Dependency], normalize: bool) -> JsonSchema:
    resolved: dict[str, Any] = {}
    for d in deps:
        if d.schema_type != "JSON":
            raise InvalidSchema(f"reference {d.name} is a {d.schema_type} schema, not JSON")
        resolved[d.name] = _load(d.schema, f" (reference {d.name})")
    raw = _load(text, "")
    s = JsonSchema(raw, resolved, normalize)
    _check_refs(s, raw, raw, set())
    return s


def _check_refs(s: JsonSchema, node: Any, root: Any, seen: set[int]) -> None:
    if isinstance(node, list):
        for n in node:
            _check_refs(s, n, root, seen)
    elif isinstance(node, dict):
        if id(node) in seen:
            return
        seen.add(id(node))
        ref = node.get("$ref")
        if isinstance(ref, str):
            target, new_root = _resolve(s, ref, root)
            if target is _MISSING:
                raise InvalidSchema(f"Invalid JSON schema: $ref {ref!r} does not resolve (a reference to "
                                    f"another schema needs a schema reference named {ref.split('#')[0]!r})")
            if new_root is not root:
                _check_refs(s, target, new_root, seen)
        for k, v in node.items():
            if k not in ("enum", "const", "default", "examples"):
                _check_refs(s, v, root, seen)


_MISSING = object()


def _pointer(doc: Any, fragment: str) -> Any:
    node = doc
    for part in [p for p in fragment.lstrip("/").split("/") if p] if fragment else []:
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node


def _resolve(s: JsonSchema, ref: str, root: Any) -> tuple[Any, Any]:
    """A $ref's target and the document it lives in: a pointer into the current document, or a
    referenced schema by name (optionally with a fragment)."""
    base, _, frag = ref.partition("#")
    if not base:
        return _pointer(root, frag), root
    doc = s.deps.get(base)
    if doc is None:
        for name, d in s.deps.items():
            if name.rsplit("/", 1)[-1] == base.rsplit("/", 1)[-1] or \
                    (isinstance(d, dict) and d.get("$id") == base):
                doc = d
                break
    if doc is None:
        if isinstance(root, dict) and root.get("$id") == base:
            return _pointer(root, frag), root
        return _MISSING, root
    return _pointer(doc, frag), doc


_NUMERIC_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_NUMERIC_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")


def _types(s: dict[str, Any]) -> set[str] | None:
    t = s.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


def _trivial(s: Any) -> bool:
    """Accepts every document."""
    return s is True or s == {} or (isinstance(s, dict) and not (set(s) - _ANNOTATIONS))


_ANNOTATIONS = {"title", "description", "$comment", "default", "examples", "$id", "$schema",
                "readOnly", "writeOnly", "deprecated", "definitions", "$defs", "format"}


class _Checker:
    def __init__(self, reader: JsonSchema, writer: JsonSchema) -> None:
        self.r_schema = reader
        self.w_schema = writer
        self.out: list[str] = []
        self._active: set[tuple[int, int]] = set()

    def add(self, kind: str, path: str, detail: str) -> None:
        self.out.append(f"{kind} at {path}: {detail}")

    def _deref(self, side: JsonSchema, node: Any, root: Any) -> tuple[Any, Any]:
        for _ in range(32):
            if isinstance(node, dict) and isinstance(node.get("$ref"), str):
                target, root = _resolve(side, node["$ref"], root)
                if target is _MISSING:
                    return True, root
                extra = {k: v for k, v in node.items() if k != "$ref"}
                node = {**target, **extra} if extra and isinstance(target, dict) else target
            else:
                break
        return node, root

    def check(self, r: Any, w: Any, path: str, r_root: Any = None, w_root: Any = None) -> None:
        r_root = self.r_schema.raw if r_root is None else r_root
        w_root = self.w_schema.raw if w_root is None else w_root
        r, r_root = self._deref(self.r_schema, r, r_root)
        w, w_root = self._deref(self.w_schema, w, w_root)
        key = (id(r), id(w))
        if key in self._active:
            return
        self._active.add(key)
        try:
            self._check(r, w, path, r_root, w_root)
        finally:
            self._active.discard(key)

    def _sub(self, r: Any, w: Any, r_root: Any, w_root: Any) -> bool:
        """Does `r` accept everything `w` does (without recording messages)?"""
        saved = self.out
        self.out = []
        self.check(r, w, "#", r_root, w_root)
        ok = not self.out
        self.out = saved
        return ok

    def _check(self, r: Any, w: Any, path: str, r_root: Any, w_root: Any) -> None:
        if _trivial(r) or w is False:
            return
        if r is False:
            self.add("SCHEMA_NARROWED", path, "the reader schema accepts nothing")
            return
        if w is True:
            w = {}
        assert isinstance(r, dict) and isinstance(w, dict)
        # combined schemas
        for comb in ("oneOf", "anyOf"):
            if isinstance(r.get(comb), list):
                w_alts = w.get("oneOf") or w.get("anyOf")
                base_w = {k: v for k, v in w.items() if k not in ("oneOf", "anyOf")}
                alts = [{**base_w, **a} if isinstance(a, dict) else a for a in w_alts] \
                    if isinstance(w_alts, list) else [w]
                for i, alt in enumerate(alts):
                    if not any(self._sub(ra, alt, r_root, w_root) for ra in r[comb]):
                        self.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED" if isinstance(w_alts, list)
                                 else "SUM_TYPE_NARROWED", f"{path}/{comb}",
                                 f"writer alternative {i} is accepted by no {comb} alternative of the reader")
                rest = {k: v for k, v in r.items() if k != comb}
                if not _trivial(rest):
                    self.check(rest, w, path, r_root, w_root)
                return
        if isinstance(r.get("allOf"), list):
            for i, ra in enumerate(r["allOf"]):
                self.check(ra, w, f"{path}/allOf/{i}", r_root, w_root)
            rest = {k: v for k, v in r.items() if k != "allOf"}
            if not _trivial(rest):
                self.check(rest, w, path, r_root, w_root)
            return
        for comb in ("oneOf", "anyOf"):
            if isinstance(w.get(comb), list):
                base_w = {k: v for k, v in w.items() if k != comb}
                for i, wa in enumerate(w[comb]):
                    alt = {**base_w, **wa} if isinstance(wa, dict) else wa
                    self.check(r, alt, f"{path}/{comb}/{i}", r_root, w_root)
                return
        if isinstance(w.get("allOf"), list):
            merged: dict[str, Any] = {k: v for k, v in w.items() if k != "allOf"}
            for wa in w["allOf"]:
                wa, _ = self._deref(self.w_schema, wa, w_root)
                if isinstance(wa, dict):
                    merged = {**wa, **merged}
            self.check(r, merged, path, r_root, w_root)
            return
        if "not" in r and r.get("not") != w.get("not"):
            self.add("NOT_TYPE_EXTENDED", f"{path}/not", "the reader's 'not' rejects documents the writer "
                                                        "accepts")
        self._check_type(r, w, path)
        self._check_values(r, w, path)
        self._check_bounds(r, w, path)
        rt, wt = _types(r), _types(w)
        if (rt is None or "object" in rt) and (wt is None or "object" in wt):
            self._check_object(r, w, path, r_root, w_root)
        if (rt is None or "array" in rt) and (wt is None or "array" in wt):
            self._check_array(r, w, path, r_root, w_root)

    def _check_type(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        rt, wt = _types(r), _types(w)
        if rt is None:
            return
        if wt is None:
            self.add("TYPE_NARROWED", f"{path}/type", f"the reader only accepts {sorted(rt)}")
            return
        if "number" in rt:
            rt = rt | {"integer"}
        missing = wt - rt
        if missing:
            kind = "TYPE_NARROWED" if missing == {"number"} and "integer" in rt else "TYPE_CHANGED"
            self.add(kind, f"{path}/type", f"writer type {sorted(wt)} is not accepted by reader type "
                                           f"{sorted(_types(r) or [])}")

    def _check_values(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        if "enum" in r:
            wvals = w.get("enum", [w["const"]] if "const" in w else None)
            if wvals is None:
                self.add("ENUM_ARRAY_NARROWED", f"{path}/enum", "the reader added an enum")
            elif any(v not in r["enum"] for v in wvals):
                extra = [v for v in wvals if v not in r["enum"]]
                self.add("ENUM_ARRAY_NARROWED", f"{path}/enum",
                         f"writer values {extra} are not in the reader enum")
        if "const" in r:
            wvals = w.get("enum", [w["const"]] if "const" in w else None)
            if wvals is None or any(v != r["const"] for v in wvals):
                self.add("CONST_CHANGED", f"{path}/const", "the reader's const rejects writer values")
        if "pattern" in r and r["pattern"] != w.get("pattern"):
            self.add("PATTERN_CHANGED" if "pattern" in w else "PATTERN_ADDED", f"{path}/pattern",
                     f"pattern {r['pattern']!r}")
        if "multipleOf" in r:
            wm = w.get("multipleOf")
            if not isinstance(wm, (int, float)) or wm % r["multipleOf"] != 0:
                self.add("MULTIPLE_OF_CHANGED", f"{path}/multipleOf", f"multipleOf {r['multipleOf']}")
        if r.get("uniqueItems") is True and w.get("uniqueItems") is not True:
            self.add("UNIQUE_ITEMS_ADDED", f"{path}/uniqueItems", "the reader requires unique items")
        for dep in ("dependencies", "dependentRequired", "dependentSchemas"):
            if r.get(dep) and r.get(dep) != w.get(dep):
                self.add("DEPENDENCY_ADDED", f"{path}/{dep}", f"{dep} changed")

    def _check_bounds(self, r: dict[str, Any], w: dict[str, Any], path: str) -> None:
        for k in _NUMERIC_LOWER:
            rv, wv = r.get(k), w.get(k)
            if isinstance(rv, (int, float)) and not isinstance(rv, bool):
                if not isinstance(wv, (int, float)):
                    self.add(k.upper() + "_ADDED", f"{path}/{k}", f"the reader added {k} {rv}")
                elif wv < rv:
                    self.add(k.upper() + "_INCREASED", f"{path}/{k}", f"{k} {wv} -> {rv}")
        for k in _NUMERIC_UPPER:
            rv, wv = r.get(k), w.get(k)
            if isinstance(rv, (int, float)) and not isinstance(rv, bool):
                if not isinstance(wv, (int, float)):
                    self.add(k.upper() + "_ADDED", f"{path}/{k}", f"the reader added {k} {rv}")
                elif wv > rv:
                    self.add(k.upper() + "_DECREASED", f"{path}/{k}", f"{k} {wv} -> {rv}")

    def _check_object(self, r: dict[str, Any], w: dict[str, Any], path: str, r_root: Any,
                      w_root: Any) -> None:
        rp = r.get("properties") or {}
        wp = w.get("properties") or {}
        r_add = r.get("additionalProperties", True)
        w_add = w.get("additionalProperties", True)
        r_req = set(r.get("required") or [])
        w_req = set(w.get("required") or [])
        for name, ws in wp.items():
            where = f"{path}/properties/{name}"
            if name in rp:
                self.check(rp[name], ws, where, r_root, w_root)
            elif r_add is False and not self._pattern_covers(r, name):
                self.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where,
                         f"property '{name}' is no longer allowed by the reader")
            elif isinstance(r_add, dict) and not self._sub(r_add, ws, r_root, w_root):
                self.add("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                         f"property '{name}' does not match the reader's additionalProperties")
        for name, rs in rp.items():
            if name in wp:
                continue
            where = f"{path}/properties/{name}"
            if name in r_req and name not in w_req:
                self.add("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where,
                         f"new required property '{name}'")
            elif w_add is False and not self._pattern_covers(w, name):
                pass  # the writer never produced it
            elif isinstance(w_add, dict):
                if not self._sub(rs, w_add, r_root, w_root):
                    self.add("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                             f"property '{name}' is narrower than the writer's additionalProperties")
            elif not _trivial(rs):
                self.add("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where,
                         f"property '{name}' was added to a schema whose writer accepts any "
                         "additional property")
        for name in sorted(r_req - w_req):
            if name in wp:
                self.add("REQUIRED_ATTRIBUTE_ADDED", f"{path}/required", f"property '{name}' became required")
        if r_add is False and w_add is not False:
            self.add("ADDITIONAL_PROPERTIES_REMOVED", f"{path}/additionalProperties",
                     "the reader no longer accepts additional properties")
        elif isinstance(r_add, dict) and w_add is not False:
            wa = {} if w_add is True else w_add
            if not self._sub(r_add, wa, r_root, w_root):
                self.add("ADDITIONAL_PROPERTIES_NARROWED", f"{path}/additionalProperties",
                         "the reader's additionalProperties is narrower")

    @staticmethod
    def _pattern_covers(s: dict[str, Any], name: str) -> bool:
        import re
        return any(re.search(p, name) for p in (s.get("patternProperties") or {}))

    def _check_array(self, r: dict[str, Any], w: dict[str, Any], path: str, r_root: Any,
                     w_root: Any) -> None:
        ri, wi = r.get("items", True), w.get("items", True)
        if isinstance(ri, list) or isinstance(wi, list):
            rl = ri if isinstance(ri, list) else None
            wl = wi if isinstance(wi, list) else None
            if rl is not None and wl is not None:
                for i, (a, b) in enumerate(zip(rl, wl, strict=False)):
                    self.check(a, b, f"{path}/items/{i}", r_root, w_root)
                if len(rl) > len(wl):
                    self.add("ITEM_ADDED_TO_OPEN_CONTENT_MODEL", f"{path}/items", "tuple items added")
            elif rl is not None:
                for i, a in enumerate(rl):
                    self.check(a, wi, f"{path}/items/{i}", r_root, w_root)
            else:
                self.add("ITEMS_CHANGED", f"{path}/items", "tuple items became a single schema")
            return
        self.check(ri, wi, f"{path}/items", r_root, w_root)
