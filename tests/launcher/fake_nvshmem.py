"""The recording stand-in for NVSHMEM's host library (`fake_nvshmem.cc`): building it, reading
the calls it recorded, and the addresses it hands out for other PEs' heaps and for multicast
(so a test can say what a peer table must hold)."""

from __future__ import annotations

from pathlib import Path

from tests.launcher.fake_driver import build_stand_in

SOURCE = Path(__file__).with_name("fake_nvshmem.cc")
LOG_VARIABLE = "SMALTI_FAKE_NVSHMEM_LOG"  # where the stand-in appends its JSON lines
FAIL_VARIABLE = "SMALTI_FAKE_NVSHMEM_FAIL"  # NAME[,...]: those entry points fail
UNREACHABLE_VARIABLE = "SMALTI_FAKE_NVSHMEM_UNREACHABLE"  # PE[,...]: nvshmem_ptr gives null
NO_MULTICAST_VARIABLE = "SMALTI_FAKE_NVSHMEM_NO_MULTICAST"  # 1: nvshmemx_mc_ptr gives null
INIT_WITH_UNIQUEID = 1 << 3  # NVSHMEMX_INIT_WITH_UNIQUEID
UNIQUE_ID_VERSION = (1 << 16) + 128  # nvshmemx_uniqueid_t's version field
FILL = 0xA5  # what a fresh heap holds


def build(directory: Path) -> Path:
    """Compile the stand-in to `directory`/libnvshmem_host.so.3 (what SMALTI_LIBNVSHMEM names)."""
    return build_stand_in(SOURCE, directory / "libnvshmem_host.so.3")


def peer_address(pe: int, index: int, offset: int = 0) -> int:
    """What nvshmem_ptr gives for another PE's copy of allocation `index` at `offset`."""
    return 0x500000000000 + (pe << 36) + (index << 32) + offset


def multicast_address(index: int, offset: int = 0) -> int:
    """What nvshmemx_mc_ptr gives for allocation `index` at `offset`."""
    return 0x600000000000 + (index << 32) + offset
