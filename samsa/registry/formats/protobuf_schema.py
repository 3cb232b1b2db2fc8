"""Protobuf: .proto text compiled with protoc (grpcio-tools, in-process) into a FileDescriptorProto;
base64 FileDescriptorProtos (what confluent-kafka's serializers register) accepted as they are.
Compatibility compares messages by full name and fields by number and wire type."""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import subprocess
import sys
import tempfile
import threading

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

from . import Dependency, InvalidSchema, ParsedSchema

MAIN_NAME = "schema.proto"
_protoc_lock = threading.Lock()
_B64 = re.compile(r"^[A-Za-z0-9+/=\s]+$")


def _include_dir() -> str:
    import grpc_tools
    return os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")


@functools.lru_cache(maxsize=64)
def well_known(name: str) -> descriptor_pb2.FileDescriptorProto | None:
    """A google/protobuf/*.proto file's descriptor, from the protobuf runtime."""
    if not name.startswith("google/protobuf/"):
        return None
    import importlib
    mod = name[len("google/protobuf/"):-len(".proto")] + "_pb2"
    try:
        importlib.import_module(f"google.protobuf.{mod}")
        fd = descriptor_pool.Default().FindFileByName(name)
    except (ImportError, KeyError):
        return None
    out = descriptor_pb2.FileDescriptorProto()
    fd.CopyToProto(out)
    return out


class ProtobufSchema:
    schema_type = "PROTOBUF"

    def __init__(self, text: str, fdp: descriptor_pb2.FileDescriptorProto,
                 deps: list[descriptor_pb2.FileDescriptorProto]) -> None:
        self.text = text
        self.fdp = fdp
        self.deps = deps
        ident = descriptor_pb2.FileDescriptorProto()
        ident.CopyFrom(fdp)
        ident.ClearField("name")
        ident.ClearField("source_code_info")
        _clear_json_names(ident.message_type)
        self._identity = base64.b64encode(ident.SerializeToString(deterministic=True)).decode()

    def canonical(self) -> str:
        return self.text

    def identity(self) -> str:
        return self._identity

    def serialized(self) -> str:
        """The base64 FileDescriptorProto (format=serialized)."""
        return base64.b64encode(self.fdp.SerializeToString(deterministic=True)).decode()

    def compatibility(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ProtobufSchema):
            return [f"schema type changed from {writer.schema_type} to PROTOBUF"]
        return check(self, writer)


def _clear_json_names(msgs: object) -> None:
    for m in msgs:  # type: ignore[attr-defined]
        for f in m.field:
            f.ClearField("json_name")
        _clear_json_names(m.nested_type)


def _from_base64(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    if not _B64.match(text) or "syntax" in text:
        return None
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
        fdp = descriptor_pb2.FileDescriptorProto()
        fdp.ParseFromString(raw)
    except (binascii.Error, ValueError, Exception):
        return None
    if not fdp.message_type and not fdp.enum_type and not fdp.package and not fdp.syntax:
        return None
    return fdp


def _dep_set(deps: list[Dependency]) -> list[descriptor_pb2.FileDescriptorProto]:
    """Each dependency as a FileDescriptorProto named by its import path."""
    out: list[descriptor_pb2.FileDescriptorProto] = []
    for d in deps:
        if d.schema_type != "PROTOBUF":
            raise InvalidSchema(f"reference {d.name} is a {d.schema_type} schema, not PROTOBUF")
        fdp = _compile(d.schema, out, d.name)
        fdp.name = d.name
        out.append(fdp)
    return out


def _check_pool(fdp: descriptor_pb2.FileDescriptorProto,
                deps: list[descriptor_pb2.FileDescriptorProto]) -> None:
    """Build the descriptor in a private pool: unresolved types and bad numbers fail here."""
    pool = descriptor_pool.DescriptorPool()
    have = {d.name for d in deps}

    def add_well_known(names: object) -> None:
        for n in names:  # type: ignore[attr-defined]
            if n in have:
                continue
            wk = well_known(n)
            if wk is None:
                raise InvalidSchema(f"Import \"{n}\" was not found (add it as a schema reference)")
            add_well_known(wk.dependency)
            pool.Add(wk)
            have.add(n)

    try:
        for d in deps:
            add_well_known(d.dependency)
            pool.Add(d)
        add_well_known(fdp.dependency)
        pool.Add(fdp)
        pool.FindFileByName(fdp.name)
    except InvalidSchema:
        raise
    except Exception as e:
        raise InvalidSchema(f"Invalid Protobuf schema: {e}") from None


def _compile(text: str, deps: list[descriptor_pb2.FileDescriptorProto],
             name: str = MAIN_NAME) -> descriptor_pb2.FileDescriptorProto:
    fdp = _from_base64(text)
    if fdp is not None:
        if not fdp.name:
            fdp.name = name
        _check_pool(fdp, deps)
        return fdp
    return _protoc(text, deps, name)


def _protoc(text: str, deps: list[descriptor_pb2.FileDescriptorProto],
            name: str) -> descriptor_pb2.FileDescriptorProto:
    from grpc_tools import _protoc_compiler  # type: ignore[attr-defined]

    fname = name if name.endswith(".proto") and ".." not in name and not name.startswith("/") \
        else MAIN_NAME
    with tempfile.TemporaryDirectory(prefix="samsa-proto-") as d:
        path = os.path.join(d, "src", fname)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        out = os.path.join(d, "out.bin")
        args = ["protoc", f"-I{os.path.join(d, 'src')}", f"-I{_include_dir()}",
                f"--descriptor_set_out={out}"]
        if deps:
            fds = descriptor_pb2.FileDescriptorSet()
            fds.file.extend(deps)
            with open(os.path.join(d, "deps.bin"), "wb") as f:
                f.write(fds.SerializeToString())
            args.insert(1, f"--descriptor_set_in={os.path.join(d, 'deps.bin')}")
        args.append(fname)
        with _protoc_lock:
            rc = _protoc_compiler.run_main([a.encode() for a in args])
        if rc != 0:
            raise InvalidSchema(f"Invalid Protobuf schema: {_protoc_message(args, d)}")
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
    fdp = fds.file[-1]
    fdp.name = name
    return fdp


def _protoc_message(args: list[str], cwd: str) -> str:
    """protoc prints its errors to the process's stderr; run it again in a child to read them."""
    try:
        r = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", *args[1:]], cwd=cwd,
                           capture_output=True, text=True, timeout=30)
        msg = " ".join(line.strip() for line in r.stderr.splitlines() if line.strip())
        return msg.replace(os.path.join(cwd, "src") + os.sep, "") or "protoc failed"
    except (OSError, subprocess.SubprocessError) as e:
        return f"protoc failed ({e})"


@functools.lru_cache(maxsize=512)
def _parse_cached(text: str, deps: tuple[Dependency, ...]) -> ProtobufSchema:
    dep_fdps = _dep_set(list(deps))
    fdp = _compile(text, dep_fdps)
    if not fdp.message_type and not fdp.enum_type:
        raise InvalidSchema("Invalid Protobuf schema: it defines no message")
    return ProtobufSchema(text, fdp, dep_fdps)


def parse(text: str, deps: list[Dependency], normalize: bool) -> ProtobufSchema:
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchema("Invalid Protobuf schema: empty")
    return _parse_cached(text, tuple(deps))


# ---- compatibility ---------------------------------------------------------------------------

_VARINT = {F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL, F.TYPE_ENUM}
_GROUPS = [_VARINT, {F.TYPE_SINT32, F.TYPE_SINT64}, {F.TYPE_FIXED32, F.TYPE_SFIXED32},
           {F.TYPE_FIXED64, F.TYPE_SFIXED64}, {F.TYPE_STRING, F.TYPE_BYTES}]
_LENGTH_DELIMITED = {F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE}
_TYPE_NAMES = {v: k[5:].lower() for k, v in F.Type.items()}


def _messages(schema: ProtobufSchema) -> dict[str, descriptor_pb2.DescriptorProto]:
    out: dict[str, descriptor_pb2.DescriptorProto] = {}

    def walk(prefix: str, msgs: object) -> None:
        for m in msgs:  # type: ignore[attr-defined]
            name = f"{prefix}.{m.name}"
            if not m.options.map_entry:
                out[name] = m
            walk(name, m.nested_type)

    walk("." + schema.fdp.package if schema.fdp.package else "", schema.fdp.message_type)
    return out


def _enums(schema: ProtobufSchema) -> dict[str, descriptor_pb2.EnumDescriptorProto]:
    out: dict[str, descriptor_pb2.EnumDescriptorProto] = {}
    pkg = "." + schema.fdp.package if schema.fdp.package else ""
    for e in schema.fdp.enum_type:
        out[f"{pkg}.{e.name}"] = e

    def walk(prefix: str, msgs: object) -> None:
        for m in msgs:  # type: ignore[attr-defined]
            for e in m.enum_type:
                out[f"{prefix}.{m.name}.{e.name}"] = e
            walk(f"{prefix}.{m.name}", m.nested_type)

    walk(pkg, schema.fdp.message_type)
    return out


def _oneof(m: descriptor_pb2.DescriptorProto, f: descriptor_pb2.FieldDescriptorProto) -> str | None:
    if not f.HasField("oneof_index") or f.proto3_optional:
        return None
    return m.oneof_decl[f.oneof_index].name


def _kind(f: descriptor_pb2.FieldDescriptorProto) -> str:
    if f.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        return "message"
    return "enum" if f.type == F.TYPE_ENUM else "scalar"


def _compatible_types(r: descriptor_pb2.FieldDescriptorProto,
                      w: descriptor_pb2.FieldDescriptorProto) -> str | None:
    if r.type == w.type:
        if r.type in (F.TYPE_MESSAGE, F.TYPE_ENUM, F.TYPE_GROUP) and r.type_name != w.type_name:
            return "FIELD_NAMED_TYPE_CHANGED"
        return None
    if any(r.type in g and w.type in g for g in _GROUPS):
        return None
    if _kind(r) != _kind(w) and not ({r.type, w.type} <= _VARINT):
        return "FIELD_KIND_CHANGED"
    return "FIELD_SCALAR_KIND_CHANGED"


def check(reader: ProtobufSchema, writer: ProtobufSchema) -> list[str]:
    """Can a reader with `reader`'s descriptors parse what `writer` serialized?"""
    out: list[str] = []
    if reader.fdp.package != writer.fdp.package:
        out.append(f"PACKAGE_CHANGED: package '{writer.fdp.package}' became '{reader.fdp.package}'")
        return out
    rmsgs, wmsgs = _messages(reader), _messages(writer)
    for name, wm in wmsgs.items():
        rm = rmsgs.get(name)
        if rm is None:
            out.append(f"MESSAGE_REMOVED at #/{name.lstrip('.')}: the reader has no message {name[1:]}")
            continue
        out.extend(_check_message(name.lstrip("."), rm, wm))
    renums, wenums = _enums(reader), _enums(writer)
    for name in wenums:
        if name not in renums and any(f.type_name == name for m in rmsgs.values() for f in m.field):
            out.append(f"ENUM_REMOVED at #/{name.lstrip('.')}")
    return out


def _check_message(path: str, rm: descriptor_pb2.DescriptorProto,
                   wm: descriptor_pb2.DescriptorProto) -> list[str]:
    out: list[str] = []
    rfields = {f.number: f for f in rm.field}
    wfields = {f.number: f for f in wm.field}
    moved_to_new_oneof: dict[str, list[int]] = {}
    for num, wf in wfields.items():
        rf = rfields.get(num)
        where = f"#/{path}/{num}"
        if rf is None:
            if wf.label == F.LABEL_REQUIRED:
                out.append(f"REQUIRED_FIELD_REMOVED at {where}: required field '{wf.name}' removed")
            elif _oneof(wm, wf) is not None:
                out.append(f"ONEOF_FIELD_REMOVED at {where}: field '{wf.name}' removed from oneof "
                           f"'{_oneof(wm, wf)}'")
            continue
        problem = _compatible_types(rf, wf)
        if problem:
            out.append(f"{problem} at {where}: field '{wf.name}' was "
                       f"{_TYPE_NAMES.get(wf.type, wf.type)}{' ' + wf.type_name if wf.type_name else ''}, "
                       f"now {_TYPE_NAMES.get(rf.type, rf.type)}{' ' + rf.type_name if rf.type_name else ''}")
        r_rep, w_rep = rf.label == F.LABEL_REPEATED, wf.label == F.LABEL_REPEATED
        if r_rep != w_rep and not problem:
            if not (rf.type in _LENGTH_DELIMITED and wf.type in _LENGTH_DELIMITED):
                out.append(f"FIELD_NUMERIC_LABEL_CHANGED at {where}: field '{wf.name}' changed between "
                           "repeated and singular")
        if rf.label == F.LABEL_REQUIRED and wf.label != F.LABEL_REQUIRED:
            out.append(f"REQUIRED_FIELD_ADDED at {where}: field '{rf.name}' became required")
        ro, wo = _oneof(rm, rf), _oneof(wm, wf)
        if ro is not None and wo is None:
            existing = [f.number for f in wm.field if _oneof(wm, f) is not None
                        and any(_oneof(rm, g) == ro and g.number == f.number for g in rm.field)]
            if existing:
                out.append(f"FIELD_MOVED_TO_EXISTING_ONEOF at {where}: field '{rf.name}' moved into "
                           f"oneof '{ro}'")
            else:
                moved_to_new_oneof.setdefault(ro, []).append(num)
    for ro, nums in moved_to_new_oneof.items():
        if len(nums) > 1:
            out.append(f"MULTIPLE_FIELDS_MOVED_TO_ONEOF at #/{path}: fields {nums} moved into oneof '{ro}'")
    for num, rf in rfields.items():
        if num not in wfields and rf.label == F.LABEL_REQUIRED:
            out.append(f"REQUIRED_FIELD_ADDED at #/{path}/{num}: new required field '{rf.name}'")
    return out
