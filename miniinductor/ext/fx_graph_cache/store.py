"""Entries of the compiled-graph cache on disk: written atomically, checked on every load.

Mirrors the storage half of `FxGraphCache` in `torch/_inductor/codecache.py` (`_save_graph`,
`_lookup_graph`). An entry is one file, `fxgraph/<structure>/<key>.entry` in the cache
folder (runtime/cpp_builder.cache_dir()): a line of magic and format version, a line of JSON
(the key's details, the payload's size and SHA-256), then the payload: a line of JSON (the
wrapper's source, counts for metrics, each constant tensor's name and layout) and the
constants' bytes. (Not torch.save: torch.load inside AOTAutograd's tracing context gives
meta tensors; nor pickle: an entry is data, never code but the wrapper.) It is written under a temporary name
and renamed (os.replace), so a reader never sees half of it; a file that is truncated,
altered, or of another format fails `read_entry`'s checks and is rebuilt, never run.
The capture level's entries (capture.py), `aotgraph/<structure>/<key>.entry`, have the same
framing with a payload of one JSON object (`write_record`, `read_record`).
Simplified: no remote cache, no size limit or eviction.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ...runtime.cpp_builder import cache_dir

MAGIC = b"miniinductor fx graph cache, format "
FORMAT = 1


class CorruptEntry(Exception):
    """An entry that fails its checks: rebuilt."""


def folder(structure_key: str, kind: str = "fxgraph") -> Path:
    return cache_dir() / kind / structure_key


def entry_path(structure_key: str, key: str, kind: str = "fxgraph") -> Path:
    return folder(structure_key, kind) / f"{key}.entry"


def write_entry(path: Path, details: dict, source: str, constants: dict, stats: dict) -> str:
    """Write a compiled graph's entry; its payload's SHA-256."""
    with unset_fake_temporarily():
        blobs = [tensor_bytes(t) for t in constants.values()]
    layouts = [{"name": name, "dtype": str(t.dtype).removeprefix("torch."), "size": list(t.shape),
                "stride": list(t.stride()), "device": str(t.device), "nbytes": len(blob)}
               for (name, t), blob in zip(constants.items(), blobs)]
    data = json.dumps({"source": source, "stats": stats, "constants": layouts}).encode() + b"\n" + b"".join(blobs)
    return _write(path, details, data)


def write_record(path: Path, details: dict, record: dict) -> str:
    """Write an entry whose payload is one JSON object (capture.py's); its payload's SHA-256."""
    return _write(path, details, json.dumps(record).encode())


def _write(path: Path, details: dict, data: bytes) -> str:
    header = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "details": details}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(MAGIC + f"{FORMAT}\n".encode() + json.dumps(header).encode() + b"\n" + data)
    os.replace(tmp, path)
    return header["sha256"]


def tensor_bytes(t: torch.Tensor) -> bytes:
    """A real tensor's elements in row-major order."""
    return t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes()


def _tensor(layout: dict, blob: bytes) -> torch.Tensor:
    dtype = getattr(torch, layout["dtype"])
    flat = torch.frombuffer(bytearray(blob), dtype=torch.uint8) if blob else torch.empty(0, dtype=torch.uint8)
    value = torch.empty_strided(layout["size"], layout["stride"], dtype=dtype)
    value.copy_(flat.view(dtype).reshape(layout["size"]))
    return value.to(layout["device"])


def read_header(handle) -> dict:
    """The entry's JSON line, after checking its format line."""
    first = handle.readline()
    if not first.startswith(MAGIC):
        raise CorruptEntry("not an entry of this cache")
    if first[len(MAGIC):].strip() != str(FORMAT).encode():
        raise CorruptEntry(f"format {first[len(MAGIC):].strip().decode(errors='replace')}, not {FORMAT}")
    try:
        return json.loads(handle.readline())
    except ValueError as exc:
        raise CorruptEntry(f"its header does not parse ({exc})") from None


def _read(path: Path) -> tuple[dict, bytes]:
    """(header, payload) of an entry whose size and checksum match its header."""
    with open(path, "rb") as handle:
        header = read_header(handle)
        data = handle.read()
    if len(data) != header.get("size"):
        raise CorruptEntry(f"its payload has {len(data)} bytes, not {header.get('size')} (truncated?)")
    if hashlib.sha256(data).hexdigest() != header.get("sha256"):
        raise CorruptEntry("its payload's checksum does not match")
    return header, data


def read_entry(path: Path) -> tuple[dict, dict]:
    """(header, payload) of a checked entry: the header {details, size, sha256}, the payload
    {source, stats, constants: {name: tensor}}; CorruptEntry saying what is wrong."""
    header, data = _read(path)
    meta, _, blobs = data.partition(b"\n")
    try:
        payload = json.loads(meta)
        constants, offset = {}, 0
        with unset_fake_temporarily():
            for layout in payload["constants"]:
                constants[layout["name"]] = _tensor(layout, blobs[offset:offset + layout["nbytes"]])
                offset += layout["nbytes"]
    except (ValueError, KeyError, TypeError, AttributeError, RuntimeError) as exc:
        raise CorruptEntry(f"its payload does not parse ({type(exc).__name__}: {exc})") from None
    return header, {**payload, "constants": constants}


def read_record(path: Path) -> tuple[dict, dict]:
    """(header, record) of a checked entry written by `write_record`."""
    header, data = _read(path)
    try:
        record = json.loads(data)
    except ValueError as exc:
        raise CorruptEntry(f"its payload does not parse ({exc})") from None
    if not isinstance(record, dict):
        raise CorruptEntry("its payload is not a record")
    return header, record


def neighbours(exclude: Path) -> list[dict]:
    """The details of every readable entry in the folder of `exclude` (the same graph
    structure) but `exclude`."""
    found = []
    for path in sorted(exclude.parent.glob("*.entry")):
        if path == exclude:
            continue
        try:
            with open(path, "rb") as handle:
                found.append(read_header(handle)["details"])
        except (OSError, CorruptEntry, KeyError):
            continue
    return found
