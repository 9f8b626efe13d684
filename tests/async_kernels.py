"""PTX text of small TMA / mbarrier / wgmma kernels the asynchronous-simulator tests run."""

from __future__ import annotations

HEADER = """.version 8.0
.target sm_90a
.address_size 64
"""


def copy_out(size: int, threads: int, label: str = "COPY") -> str:
    """Every thread copies 16-byte chunks of `smem[0:size]` to the `out` buffer (%rd4)."""
    return f"""
	mov.u32 	%r2, smem;
	shl.b32 	%r3, %r1, 4;
{label}:
	setp.ge.u32 	%p3, %r3, {size};
	@%p3 bra 	{label}_DONE;
	add.u32 	%r4, %r2, %r3;
	ld.shared.v4.b32 	{{%r5, %r6, %r7, %r8}}, [%r4];
	cvt.u64.u32 	%rd5, %r3;
	add.s64 	%rd6, %rd4, %rd5;
	st.global.v4.b32 	[%rd6], {{%r5, %r6, %r7, %r8}};
	add.u32 	%r3, %r3, {16 * threads};
	bra.uni 	{label};
{label}_DONE:"""


def tma_load_kernel(rank: int, loads: list[tuple[int, tuple[int, ...]]], tile_bytes: int,
                    smem_bytes: int, threads: int = 128, wait: bool = True,
                    expect: int | None = None) -> str:
    """Thread 0 issues TMA loads (shared offset, coordinates) on one mbarrier; everyone waits
    on phase 0 (unless `wait` is False) and copies the loaded bytes to `out`."""
    expect = tile_bytes * len(loads) if expect is None else expect
    issues = "\n".join(
        f"\tcp.async.bulk.tensor.{rank}d.shared::cluster.global.tile."
        f"mbarrier::complete_tx::bytes [smem+{offset}], "
        f"[tmap, {{{', '.join(str(c) for c in coords)}}}], [bar];"
        for offset, coords in loads)
    waiting = """WAIT:
	mbarrier.try_wait.parity.shared::cta.b64 	%p2, [bar], 0;
	@!%p2 bra 	WAIT;""" if wait else "\tbar.sync 	0;"
    return HEADER + f"""
.visible .entry tma_load(
	.param .align 64 .b8 tmap[128],
	.param .u64 out
)
{{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<10>;
	.reg .b64 	%rd<8>;
	.shared .align 1024 .b8 smem[{smem_bytes}];
	.shared .align 8 .b64 bar;

	ld.param.u64 	%rd3, [out];
	cvta.to.global.u64 	%rd4, %rd3;
	mov.u32 	%r1, %tid.x;
	setp.eq.u32 	%p1, %r1, 0;
	@!%p1 bra 	INIT_DONE;
	mbarrier.init.shared::cta.b64 	[bar], 1;
	fence.mbarrier_init.release.cluster;
INIT_DONE:
	bar.sync 	0;
	@!%p1 bra 	ISSUED;
	mbarrier.arrive.expect_tx.shared::cta.b64 	%rd1, [bar], {expect};
{issues}
ISSUED:
{waiting}
{copy_out(tile_bytes * len(loads), threads)}
	ret;
}}
"""


def tma_store_kernel(rank: int, coords: tuple[int, ...], tile_bytes: int, fence: bool = True,
                     wait: bool = True, reduce: str | None = None, threads: int = 128) -> str:
    """Every thread fills 16-byte chunks of smem from `src`, then thread 0 stores (or reduces)
    the box at `coords` through the tensor map and waits for its bulk group."""
    op = "cp.async.bulk.tensor" if reduce is None else "cp.reduce.async.bulk.tensor"
    kind = "" if reduce is None else f".{reduce}"
    fence_line = "\tfence.proxy.async.shared::cta;" if fence else ""
    wait_line = "\tcp.async.bulk.wait_group.read 	0;" if wait else ""
    return HEADER + f"""
.visible .entry tma_store(
	.param .align 64 .b8 tmap[128],
	.param .u64 src
)
{{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<10>;
	.reg .b64 	%rd<8>;
	.shared .align 1024 .b8 smem[{tile_bytes}];

	ld.param.u64 	%rd3, [src];
	cvta.to.global.u64 	%rd4, %rd3;
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, smem;
	shl.b32 	%r3, %r1, 4;
FILL:
	setp.ge.u32 	%p3, %r3, {tile_bytes};
	@%p3 bra 	FILL_DONE;
	cvt.u64.u32 	%rd5, %r3;
	add.s64 	%rd6, %rd4, %rd5;
	ld.global.v4.b32 	{{%r5, %r6, %r7, %r8}}, [%rd6];
	add.u32 	%r4, %r2, %r3;
	st.shared.v4.b32 	[%r4], {{%r5, %r6, %r7, %r8}};
	add.u32 	%r3, %r3, {16 * threads};
	bra.uni 	FILL;
FILL_DONE:
{fence_line}
	bar.sync 	0;
	setp.eq.u32 	%p1, %r1, 0;
	@!%p1 bra 	DONE;
	{op}.{rank}d.global.shared::cta{kind}.tile.bulk_group [tmap, {{{', '.join(str(c) for c in coords)}}}], [smem];
	cp.async.bulk.commit_group;
{wait_line}
DONE:
	ret;
}}
"""


def fill_smem(size: int, threads: int, label: str = "FILL") -> str:
    """Every thread copies 16-byte chunks of the `src` buffer (%rd4) into `smem[0:size]`."""
    return f"""
	mov.u32 	%r2, smem;
	shl.b32 	%r3, %r1, 4;
{label}:
	setp.ge.u32 	%p3, %r3, {size};
	@%p3 bra 	{label}_DONE;
	cvt.u64.u32 	%rd5, %r3;
	add.s64 	%rd6, %rd4, %rd5;
	ld.global.v4.b32 	{{%r5, %r6, %r7, %r8}}, [%rd6];
	add.u32 	%r4, %r2, %r3;
	st.shared.v4.b32 	[%r4], {{%r5, %r6, %r7, %r8}};
	add.u32 	%r3, %r3, {16 * threads};
	bra.uni 	{label};
{label}_DONE:"""


def wgmma_kernel(n: int, types: str, steps: list[tuple[int | None, int]], smem_bytes: int,
                 trans: tuple[int, ...] = (), scale_ab: tuple[int, int] = (1, 1),
                 accumulate_first: bool = False, fence: bool = True, wait: bool = True,
                 read_before_wait: bool = False) -> str:
    """One warpgroup: copy `src` into smem, then one wgmma per step (A descriptor or None for
    A in registers loaded from `a_regs`, B descriptor), commit, wait, and store the f32
    accumulator fragment to `out` (thread t, register i at t * N/2 + i). The accumulator
    starts from `d_in` (same fragment order) when `accumulate_first`."""
    regs = n // 2
    d = "{" + ", ".join(f"%d{i}" for i in range(regs)) + "}"
    body = []
    for s, (a_desc, b_desc) in enumerate(steps):
        scale = "%p2" if s or accumulate_first else "%p1"
        tail = f"{scale}, {scale_ab[0]}, {scale_ab[1]}"
        if a_desc is None:
            a = "{%ra0, %ra1, %ra2, %ra3}"
            tail += "".join(f", {t}" for t in trans[1:])
        else:
            body.append(f"\tmov.b64 	%rd10, {a_desc};")
            a = "%rd10"
            tail += "".join(f", {t}" for t in trans)
        body.append(f"\tmov.b64 	%rd11, {b_desc};")
        body.append(f"\twgmma.mma_async.sync.aligned.m64n{n}k{32 // _esize(types)}.f32.{types} "
                    f"{d}, {a}, %rd11, {tail};")
    load_d = "\n".join(f"\tld.global.f32 	%d{i}, [%rd8+{4 * i}];" for i in range(regs))
    store = "\n".join(f"\tst.global.f32 	[%rd7+{4 * i}], %d{i};" for i in range(regs))
    early = "\tst.global.f32 	[%rd7], %d0;\n" if read_before_wait else ""
    return HEADER + f"""
.visible .entry wgmma_test(
	.param .u64 src,
	.param .u64 a_regs,
	.param .u64 d_in,
	.param .u64 out
)
{{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<10>;
	.reg .b32 	%ra<4>;
	.reg .f32 	%d<{regs}>;
	.reg .b64 	%rd<12>;
	.shared .align 1024 .b8 smem[{smem_bytes}];

	ld.param.u64 	%rd3, [src];
	cvta.to.global.u64 	%rd4, %rd3;
	mov.u32 	%r1, %tid.x;
{fill_smem(smem_bytes, 128)}
{"	fence.proxy.async.shared::cta;" if fence else ""}
	bar.sync 	0;
	ld.param.u64 	%rd3, [a_regs];
	cvta.to.global.u64 	%rd5, %rd3;
	mul.wide.u32 	%rd6, %r1, 16;
	add.s64 	%rd5, %rd5, %rd6;
	ld.global.v4.b32 	{{%ra0, %ra1, %ra2, %ra3}}, [%rd5];
	ld.param.u64 	%rd3, [d_in];
	cvta.to.global.u64 	%rd8, %rd3;
	mul.wide.u32 	%rd6, %r1, {4 * regs};
	add.s64 	%rd8, %rd8, %rd6;
{load_d if accumulate_first else ""}
	ld.param.u64 	%rd3, [out];
	cvta.to.global.u64 	%rd7, %rd3;
	add.s64 	%rd7, %rd7, %rd6;
	setp.ne.u32 	%p1, %r1, %r1;
	setp.eq.u32 	%p2, %r1, %r1;
	wgmma.fence.sync.aligned;
{chr(10).join(body)}
	wgmma.commit_group.sync.aligned;
{early}{"	wgmma.wait_group.sync.aligned 	0;" if wait else ""}
{store}
	ret;
}}
"""


def _esize(types: str) -> int:
    return {"bf16": 2, "f16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1}[types.split(".")[0]]
