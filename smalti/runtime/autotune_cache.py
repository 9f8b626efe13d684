"""The autotuner's choices on disk: one small JSON file per (kernel, key values, arch,
compiler version), under the compile cache's directory (`<cache>/autotune/`).

Files are written as the compile cache writes its entries (cache.atomic_write: a temporary
file renamed into place), so processes that tune the same kernel at once each leave a whole
file, and a reader sees one writer's choice or none. An unreadable or corrupted entry is a
miss, removed."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from smalti.runtime.cache import (
    atomic_write,
    cache_directory,
    compiler_version,
    open_payload,
    read_entry,
    seal_payload,
)

FORMAT = 1


@dataclass(frozen=True)
class Choice:
    """What tuning chose: the config's position in the list, the config itself (to check
    that the list has not changed under it), how it was ranked, and the report's lines."""

    index: int
    config: dict
    method: str  # "measured" or "static model"
    report: tuple[str, ...] = ()


def choice_key(kernel: str, key: object, arch: str) -> str:
    """The hash naming a choice: the kernel's identity (name, source and configs), the key
    values, the arch and the compiler version."""
    material = json.dumps({"kernel": kernel, "key": repr(key), "arch": arch,
                           "compiler": compiler_version(), "format": FORMAT}, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()


class ChoiceCache:
    """Choices stored under `directory` (default: `<compile cache>/autotune`)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else cache_directory() / "autotune"

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def get(self, key: str) -> Choice | None:
        """The stored choice for `key`, or None (a corrupted entry is removed)."""
        return read_entry(self.path(key), lambda raw: decode_choice(raw, key),
                          "dropping corrupted autotune entry")

    def put(self, key: str, choice: Choice) -> None:
        atomic_write(self.path(key), encode_choice(key, choice))


def encode_choice(key: str, choice: Choice) -> bytes:
    """The entry file's bytes for `choice` (sealed as the compile cache seals its entries)."""
    return seal_payload({"key": key, "index": choice.index, "config": choice.config,
                         "method": choice.method, "report": list(choice.report)}, FORMAT)


def decode_choice(raw: bytes, key: str) -> Choice:
    """The choice in `raw`; ValueError if it is malformed, for another key, or corrupted."""
    payload = open_payload(raw, key, FORMAT)
    return Choice(int(payload["index"]), dict(payload["config"]), str(payload["method"]),
                  tuple(payload["report"]))
