"""The recording stand-in for libcuda.so.1 (`fake_libcuda.cc`): building it, reading the calls
it recorded, and the CUDA driver API's documented preconditions checked on those records in
Python (independently of the stand-in's own checks), plus `cuobjdump -elf`'s view of a cubin
to check the stand-in's reading of kernel parameters against."""

from __future__ import annotations

import json
import math
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).with_name("fake_libcuda.cc")
LOG_VARIABLE = "SMALTI_FAKE_CUDA_LOG"  # where the stand-in appends its JSON lines
FAIL_VARIABLE = "SMALTI_FAKE_CUDA_FAIL"  # NAME[:CODE]: that entry point fails
STAMP_VARIABLE = "SMALTI_FAKE_CUDA_STAMP"  # 1: a launch marks what each pointer points to
# NAME:MS[,...]: a launch of kernel NAME advances its stream's fake clock by MS milliseconds
KERNEL_MS_VARIABLE = "SMALTI_FAKE_CUDA_KERNEL_MS"

CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_INVALID_CLUSTER_SIZE = 912
CUDA_ERROR_INVALID_HANDLE = 400
CUDA_ERROR_NOT_READY = 600
EVENT_DISABLE_TIMING = 2  # CU_EVENT_DISABLE_TIMING
# The stand-in's default code per failing entry point (fake_libcuda.cc, DefaultFailure), and
# its name and text as cuGetErrorName / cuGetErrorString give them.
DEFAULT_FAILURES = {
    "cuStreamGetCtx": (400, "CUDA_ERROR_INVALID_HANDLE (invalid resource handle)"),
    "cuCtxPushCurrent_v2": (201, "CUDA_ERROR_INVALID_CONTEXT (invalid device context)"),
    "cuModuleLoadData": (200, "CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)"),
    "cuModuleGetFunction": (500, "CUDA_ERROR_NOT_FOUND (named symbol not found)"),
    "cuFuncSetAttribute": (1, "CUDA_ERROR_INVALID_VALUE (invalid argument)"),
    "cuTensorMapEncodeTiled": (1, "CUDA_ERROR_INVALID_VALUE (invalid argument)"),
    "cuMemsetD8Async": (700, "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was "
                             "encountered)"),
    "cuLaunchKernelEx": (701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (too many resources "
                              "requested for launch)"),
    "cuEventCreate": (2, "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"),
    "cuEventRecord": (400, "CUDA_ERROR_INVALID_HANDLE (invalid resource handle)"),
    "cuEventSynchronize": (700, "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was "
                                "encountered)"),
    "cuEventElapsedTime": (600, "CUDA_ERROR_NOT_READY (device not ready)"),
}

# H100 (compute capability 9.0) limits, from the CUDA programming guide's table of technical
# specifications and the driver API reference.
MAX_THREADS_PER_BLOCK = 1024
DEFAULT_DYNAMIC_SHARED = 48 * 1024  # above this a launch must opt in (cuFuncSetAttribute)
MAX_DYNAMIC_SHARED = 227 * 1024  # sharedMemPerBlockOptin
MAX_PORTABLE_CLUSTER = 8
REGISTERS_PER_BLOCK = 65536
MAX_DYNAMIC_SHARED_SIZE_BYTES = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
CLUSTER_DIMENSION = 4  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
TENSOR_MAP_BYTES = 128

# cuTensorMapEncodeTiled's enums (driver API reference, "Tensor Map Object Management").
ELEMENT_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4,
                 12: 4}  # CUtensorMapDataType UINT8 .. TFLOAT32_FTZ
FLOAT_TYPES = {6, 7, 8, 9, 10, 11, 12}
INTERLEAVES = {0, 1, 2}  # NONE, 16B, 32B
SWIZZLE_SPANS = {0: None, 1: 32, 2: 64, 3: 128}  # CUtensorMapSwizzle -> bytes
L2_PROMOTIONS = {0, 1, 2, 3}
OOB_FILLS = {0, 1}  # NONE, NAN_REQUEST_ZERO_FMA


def build(directory: Path) -> Path:
    """Compile the stand-in to `directory`/libcuda.so.1 (what SMALTI_LIBCUDA points at)."""
    return build_stand_in(SOURCE, directory / "libcuda.so.1")


def build_stand_in(source: Path, output: Path) -> Path:
    """Compile a stand-in library's C++ `source` to the shared object `output`."""
    output.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["g++", "-std=c++17", "-O1", "-shared", "-fPIC", "-Wall", "-Wextra",
                           "-fvisibility=hidden", str(source), "-o", str(output)],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"compiling {source.name} failed:\n{done.stderr}")
    return output


def kernel_milliseconds(durations: dict[str, float]) -> str:
    """The KERNEL_MS_VARIABLE value giving each kernel its device time per launch."""
    return ",".join(f"{name}:{ms!r}" for name, ms in durations.items())


def read_calls(log: Path) -> list[dict]:
    """The recorded calls, in order (none when nothing was recorded)."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line]


@dataclass(frozen=True)
class CallLog:
    """What the stand-ins recorded into `log`, as one test sees it."""

    log: Path

    def calls(self, name: str | None = None) -> list[dict]:
        calls = read_calls(self.log)
        return calls if name is None else [c for c in calls if c["call"] == name]

    def clear(self) -> None:
        self.log.unlink(missing_ok=True)


def tensor_map_violations(call: dict) -> list[str]:
    """What a cuTensorMapEncodeTiled record breaks of the documented requirements."""
    problems = []
    rank, data_type = call["rank"], call["data_type"]
    interleave, swizzle = call["interleave"], call["swizzle"]
    if call["map_address"] % 64:
        problems.append("tensorMap is not 64-byte aligned")
    if data_type not in ELEMENT_BYTES:
        problems.append(f"tensorDataType {data_type} is not a CUtensorMapDataType")
    if interleave not in INTERLEAVES:
        problems.append(f"interleave {interleave} is not a CUtensorMapInterleave")
    if swizzle not in SWIZZLE_SPANS:
        problems.append(f"swizzle {swizzle} is not an sm_90 CUtensorMapSwizzle")
    if call["l2_promotion"] not in L2_PROMOTIONS:
        problems.append(f"l2Promotion {call['l2_promotion']} is not a CUtensorMapL2promotion")
    if call["oob_fill"] not in OOB_FILLS:
        problems.append(f"oobFill {call['oob_fill']} is not a CUtensorMapFloatOOBfill")
    elif call["oob_fill"] == 1 and data_type not in FLOAT_TYPES:
        problems.append("NAN_REQUEST_ZERO_FMA fill on a non-floating-point type")
    if not 1 <= rank <= 5:
        return [*problems, f"tensorRank {rank} is not 1 to 5"]
    if interleave != 0 and rank < 3:
        problems.append("an interleaved tensor map needs rank >= 3")
    alignment = 32 if interleave == 2 else 16
    if call["address"] % alignment:
        problems.append(f"globalAddress {call['address']:#x} is not {alignment}-byte aligned")
    dims, box = call["dims"], call["box"]
    strides, element_strides = call.get("strides", []), call["element_strides"]
    for d, size in enumerate(dims):
        if not 0 < size <= 2**32:
            problems.append(f"globalDim[{d}] = {size} is not in 1..2^32")
    for d, stride in enumerate(strides):
        if stride % (32 if interleave == 2 else 16) or stride >= 2**40:
            problems.append(f"globalStrides[{d}] = {stride} is not a multiple of 16 below 2^40")
    for d, size in enumerate(box):
        if not 0 < size <= 256:
            problems.append(f"boxDim[{d}] = {size} is not in 1..256")
    for d, step in enumerate(element_strides):
        if not 0 < step <= 8:
            problems.append(f"elementStrides[{d}] = {step} is not in 1..8")
    if data_type in ELEMENT_BYTES and interleave == 0:
        inner = box[0] * ELEMENT_BYTES[data_type]
        if inner % 16:
            problems.append(f"the box's inner extent ({inner} bytes) is not a multiple of 16")
        span = SWIZZLE_SPANS.get(swizzle)
        if span is not None and inner > span:
            problems.append(f"the box's inner extent ({inner} bytes) exceeds the {span}-byte "
                            "swizzle span")
    if interleave == 2 and swizzle != 1:
        problems.append("INTERLEAVE_32B needs SWIZZLE_32B")
    return problems


def launch_cluster(launch: dict) -> tuple[int, int, int] | None:
    """The cluster dimension attribute of a cuLaunchKernelEx record, if it has one."""
    clusters = [tuple(a["cluster"]) for a in launch.get("attrs", [])
                if a["id"] == CLUSTER_DIMENSION]
    assert len(clusters) <= 1, f"{len(clusters)} cluster attributes"
    return clusters[0] if clusters else None


def launch_violations(launch: dict, kernel: dict, dynamic_shared_limit: int) -> list[str]:
    """What a cuLaunchKernelEx record breaks of the driver's preconditions, for the cubin's
    `kernel` (as the stand-in read it at module load) whose MAX_DYNAMIC_SHARED_SIZE_BYTES was
    last set to `dynamic_shared_limit` (DEFAULT_DYNAMIC_SHARED when never set)."""
    problems = []
    grid, block, shared = launch["grid"], launch["block"], launch["shared_bytes"]
    threads = math.prod(block)
    if min(grid) < 1 or min(block) < 1:
        problems.append(f"an empty grid {grid} or block {block}")
    if threads > MAX_THREADS_PER_BLOCK:
        problems.append(f"{threads} threads per block")
    if any(kernel["max_threads"]) and threads > math.prod(kernel["max_threads"]):
        problems.append(f"{threads} threads per block, over .maxntid {kernel['max_threads']}")
    if shared > MAX_DYNAMIC_SHARED:
        problems.append(f"{shared} bytes of dynamic shared memory (at most 227 KiB)")
    if shared > max(dynamic_shared_limit, DEFAULT_DYNAMIC_SHARED):
        problems.append(f"{shared} bytes of dynamic shared memory without "
                        f"MAX_DYNAMIC_SHARED_SIZE_BYTES set to at least that")
    registers_per_warp = math.ceil(kernel["registers"] * 32 / 256) * 256
    if math.ceil(threads / 32) * registers_per_warp > REGISTERS_PER_BLOCK:
        problems.append(f"{kernel['registers']} registers x {threads} threads do not fit")
    cluster = launch_cluster(launch)
    if cluster is not None:
        if math.prod(cluster) == 1:
            problems.append("a cluster attribute for a 1-CTA cluster")
        if math.prod(cluster) > MAX_PORTABLE_CLUSTER:
            problems.append(f"a non-portable cluster {cluster}")
        if any(g % c for g, c in zip(grid, cluster, strict=True)):
            problems.append(f"grid {grid} is not divisible by cluster {cluster}")
        if any(kernel["cluster"]) and list(cluster) != kernel["cluster"]:
            problems.append(f"cluster {cluster} is not .reqnctapercluster {kernel['cluster']}")
    elif any(kernel["cluster"]) and math.prod(kernel["cluster"]) > 1:
        problems.append(f"no cluster attribute for a kernel of clusters {kernel['cluster']}")
    return problems


@dataclass(frozen=True)
class KernelInfo:
    """One kernel of a cubin as `cuobjdump -elf` prints it."""

    params: list[tuple[int, int, int]]  # (ordinal, offset, size), by ordinal
    registers: int
    max_threads: list[int]
    cluster: list[int]


def cuobjdump_kernels(cuobjdump: Path, cubin: Path) -> dict[str, KernelInfo]:
    """Each kernel's EIATTR_KPARAM_INFO entries, register count, .maxntid and cluster shape,
    read from `cuobjdump -elf` (the reference the stand-in's own ELF reading is checked
    against)."""
    text = subprocess.run([str(cuobjdump), "-elf", str(cubin)], capture_output=True, text=True,
                          check=True, timeout=120).stdout
    registers = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"function: (\w+)\(0x[0-9a-f]+\)\s+register count: (\d+)", text)}
    kernels = {}
    for match in re.finditer(r"^\.nv\.info\.(\w+)\n(.*?)(?=^\S|\Z)", text, re.M | re.S):
        name, body = match.group(1), match.group(2)
        params = sorted((int(o, 16), int(f, 16), int(s, 16)) for o, f, s in re.findall(
            r"Ordinal : (0x[0-9a-f]+)\s+Offset\s+: (0x[0-9a-f]+)\s+Size\s+: (0x[0-9a-f]+)",
            body))

        def triple(attribute: str, body: str = body) -> list[int]:
            found = re.search(attribute + r"\s+Format:\s+EIFMT_SVAL\s+Value:\s+((?:0x[0-9a-f]+ "
                              r"?){3})", body)
            return [int(v, 16) for v in found.group(1).split()] if found else [0, 0, 0]

        kernels[name] = KernelInfo(params, registers[name], triple("EIATTR_MAX_THREADS"),
                                   triple("EIATTR_CTA_PER_CLUSTER"))
    return kernels


# ---------------------------------------------------------------------------------------
# Collective launches: the virtual memory management and multicast calls of a symmetric heap.

CUDA_ERROR_NOT_SUPPORTED = 801
CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217
FAKE_DEVICES = 8  # devices the stand-in models (fake_libcuda.cc: kDevices)
NO_MULTICAST_VARIABLE = "SMALTI_FAKE_CUDA_NO_MULTICAST"  # D[,...]: devices without multicast
NO_VMM_VARIABLE = "SMALTI_FAKE_CUDA_NO_VMM"  # D[,...]: devices without VMM
NO_PEER_VARIABLE = "SMALTI_FAKE_CUDA_NO_PEER"  # D[,...]: devices without peer access
# CUDA driver API enum values (cuda.h, "Virtual Memory Management").
ALLOCATION_TYPE_PINNED = 1
LOCATION_TYPE_DEVICE = 1
ACCESS_READ_WRITE = 3


def stream_of(device: int, base: int = 0x5A1700) -> int:
    """A stream handle of fake device `device` (the stand-in reads bits 4-7)."""
    return base | device << 4


@dataclass
class _Mapping:
    pointer: int
    size: int
    handle: int
    access: set[int]


def vmm_violations(calls: list[dict]) -> list[str]:
    """What the recorded calls break of the VMM and multicast APIs' documented rules, replayed
    in order (successful calls only): sizes multiples of the granularity the driver reported,
    maps inside one reservation at offset 0, access set before memory is used, every device
    added to a multicast object before memory is bound to or mapped through it, bind offsets
    and sizes multiples of the multicast granularity, and a teardown that unmaps before it
    frees addresses."""
    problems: list[str] = []
    granularity = multicast_granularity = 0
    physical: dict[int, tuple[int, int]] = {}  # handle -> (device, size)
    teams: dict[int, dict] = {}  # multicast handle -> {"devices", "size", "added", "bound"}
    reservations: dict[int, int] = {}  # base -> size
    mappings: dict[int, _Mapping] = {}

    def reservation_of(pointer: int, size: int) -> int | None:
        for base, length in reservations.items():
            if base <= pointer and pointer + size <= base + length:
                return base
        return None

    def accessible(pointer: int, size: int, device: int) -> bool:
        if reservation_of(pointer, size) is None:
            return True  # not VMM memory
        at = pointer
        while at < pointer + size:
            found = [m for m in mappings.values() if m.pointer <= at < m.pointer + m.size]
            if not found or device not in found[0].access:
                return False
            at = found[0].pointer + found[0].size
        return True

    for index, call in enumerate(calls):
        if call["result"] != 0:
            continue
        name, where = call["call"], f"call {index} ({call['call']})"
        if name == "cuMemGetAllocationGranularity":
            granularity = call["granularity"]
        elif name == "cuMulticastGetGranularity":
            multicast_granularity = call["granularity"]
        elif name == "cuMemCreate":
            prop = call["prop"]
            if not granularity or call["size"] % granularity:
                problems.append(f"{where}: size {call['size']} is not a multiple of the "
                                "allocation granularity asked for before")
            if (prop["type"], prop["location_type"]) != (ALLOCATION_TYPE_PINNED,
                                                         LOCATION_TYPE_DEVICE):
                problems.append(f"{where}: not pinned memory located on a device")
            physical[call["handle"]] = (prop["device"], call["size"])
        elif name == "cuMemAddressReserve":
            if not granularity or call["size"] % granularity:
                problems.append(f"{where}: size is not a multiple of the granularity")
            if call["alignment"] and call["pointer"] % call["alignment"]:
                problems.append(f"{where}: the reservation is not aligned as asked")
            reservations[call["pointer"]] = call["size"]
        elif name == "cuMemMap":
            pointer, size, handle = call["pointer"], call["size"], call["handle"]
            if reservation_of(pointer, size) is None:
                problems.append(f"{where}: the mapping is not inside one reservation")
            if call["offset"] != 0 or not granularity or pointer % granularity or \
                    size % granularity:
                problems.append(f"{where}: offset, address or size breaks the granularity")
            if handle in teams and len(teams[handle]["added"]) != teams[handle]["devices"]:
                problems.append(f"{where}: a multicast object mapped before every device "
                                "was added")
            elif handle in physical and size > physical[handle][1]:
                problems.append(f"{where}: a mapping larger than its allocation")
            elif handle not in physical and handle not in teams:
                problems.append(f"{where}: an unknown handle")
            mappings[pointer] = _Mapping(pointer, size, handle, set())
        elif name == "cuMemSetAccess":
            covered = [m for m in mappings.values()
                       if call["pointer"] <= m.pointer < call["pointer"] + call["size"]]
            if sum(m.size for m in covered) != call["size"] or \
                    call["pointer"] not in mappings:
                problems.append(f"{where}: the range is not whole mappings")
            for access in call["access"]:
                if access["location_type"] != LOCATION_TYPE_DEVICE:
                    problems.append(f"{where}: access for a location that is not a device")
                for m in covered:
                    if access["flags"] == ACCESS_READ_WRITE:
                        m.access.add(access["device"])
        elif name in ("cuMemsetD8_v2", "cuMemcpyHtoD_v2"):
            if not accessible(call["destination"], call["count"], call["device"]):
                problems.append(f"{where}: device {call['device']} touches memory it was "
                                "given no access to")
        elif name == "cuMulticastCreate":
            prop = call["prop"]
            if not multicast_granularity or prop["size"] % multicast_granularity:
                problems.append(f"{where}: size is not a multiple of the multicast "
                                "granularity asked for before")
            teams[call["handle"]] = {"devices": prop["num_devices"], "size": prop["size"],
                                     "added": [], "bound": set()}
        elif name == "cuMulticastAddDevice":
            team = teams[call["handle"]]
            if team["bound"]:
                problems.append(f"{where}: a device added after memory was bound")
            team["added"].append(call["device"])
        elif name == "cuMulticastBindMem":
            team = teams[call["handle"]]
            device, size = physical.get(call["memory"], (None, 0))
            if len(team["added"]) != team["devices"]:
                problems.append(f"{where}: memory bound before every device was added")
            if device not in team["added"]:
                problems.append(f"{where}: memory of a device outside the team")
            if any(call[k] % (multicast_granularity or 1) or not multicast_granularity
                   for k in ("multicast_offset", "memory_offset", "size")):
                problems.append(f"{where}: offsets or size break the multicast granularity")
            if call["size"] + call["memory_offset"] > size or \
                    call["size"] + call["multicast_offset"] > team["size"]:
                problems.append(f"{where}: the bound range exceeds the memory or the object")
            team["bound"].add(device)
        elif name == "cuMemUnmap":
            mappings.pop(call["pointer"], None)
        elif name == "cuMemAddressFree":
            base, size = call["pointer"], call["size"]
            if any(base <= m.pointer < base + size for m in mappings.values()):
                problems.append(f"{where}: addresses freed while still mapped")
            reservations.pop(base, None)
    return problems
