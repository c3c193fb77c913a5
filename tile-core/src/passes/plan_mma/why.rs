//! Why a gemm did not get a faster instruction (`Gemm::why`, shown by
//! `tile inspect`): the first condition of `wgmma` or of the tensor cores it
//! fails, in words. `plan_mma` decides; this only explains.

use super::{steps_of_16, swizzle_ok, wgmma_k, wgmma_operand_fits};
use crate::ir::*;

/// Why gemm `g` cannot take `wgmma` on sm_90a, from its shapes and the
/// block (the first condition of [`wgmma_warpgroups`] it fails), if any.
pub(super) fn wgmma_refusal(f: &PrimFunc, g: &Gemm) -> Option<String> {
    let (a, b, c) = (f.buf(g.a), f.buf(g.b), f.buf(g.c));
    let (Some(sa), Some(sb), Some(sc)) = (a.const_shape(), b.const_shape(), c.const_shape()) else {
        return Some("a tile's shape is not constant".into());
    };
    let threads = f.launch.threads;
    let (m, n) = (sc[0], sc[1]);
    let k = if g.trans_a { sa[0] } else { sa[1] };
    if threads % 128 != 0 {
        return Some(format!(
            "the block's {threads} threads are not whole warpgroups of 128"
        ));
    }
    let wgs = threads / 128;
    if m % (64 * wgs) != 0 {
        return Some(format!(
            "{m} rows over {wgs} warpgroup(s) are not whole 64-row strips per warpgroup"
        ));
    }
    if n % 8 != 0 || n > 256 {
        return Some(format!("N = {n} is not a multiple of 8 up to 256"));
    }
    let ki = wgmma_k(a.dtype);
    if k % ki != 0 {
        return Some(format!("K = {k} is not a multiple of {ki}"));
    }
    for (t, s) in [(a, &sa), (b, &sb)] {
        if s.len() == 2 && !wgmma_operand_fits(t, s) {
            return Some(format!(
                "`{}` has {} rows of {} elements: wgmma's swizzles need whole 8-row groups of rows of 32 or 64 bytes or whole 128-byte panels",
                t.name, s[0], s[1]
            ));
        }
    }
    if a.dtype.is_f8() {
        if f.arch != CudaArch::Sm90a {
            return Some(
                "fp8 tensor cores need sm_90a (this target runs the gemm as loops)".into(),
            );
        }
        if a.dtype != b.dtype {
            return Some(format!(
                "its operands are {} and {}; fp8 wgmma here takes one format",
                a.dtype, b.dtype
            ));
        }
        if g.trans_a || !g.trans_b {
            return Some(
                "fp8 wgmma reads both operands K-major: A as [M, K] and B as [N, K] with `transpose_b = true`"
                    .into(),
            );
        }
    }
    if a.scope == Scope::Fragment && !matches!(a.layout, Some(Layout::Wgmma { .. })) {
        return Some(format!(
            "its A operand `{}` is in registers of an mma.sync accumulator",
            a.name
        ));
    }
    None
}

/// Why gemm `g` cannot run on tensor cores at all, from its operands, if a
/// reason of its own shows.
pub(super) fn tensor_core_refusal(f: &PrimFunc, g: &Gemm) -> Option<String> {
    let (a, b, c) = (f.buf(g.a), f.buf(g.b), f.buf(g.c));
    if a.dtype.is_f8() {
        return wgmma_refusal(f, g)
            .or_else(|| Some("fp8 operands must be shared tiles into an f32 fragment".into()));
    }
    if !matches!(a.dtype, DType::F16 | DType::BF16) || a.dtype != b.dtype || c.dtype != DType::F32 {
        return Some("tensor cores take f16 or bf16 operands into an f32 accumulator".into());
    }
    if g.clear {
        return Some("clear_accum = true".into());
    }
    if b.scope != Scope::Shared || c.scope != Scope::Fragment {
        return Some("B must be a shared tile and the accumulator a fragment".into());
    }
    if !matches!(a.scope, Scope::Shared | Scope::Fragment) {
        return Some("A must be a shared tile or a converted accumulator".into());
    }
    let (Some(sa), Some(sb), Some(sc)) = (a.const_shape(), b.const_shape(), c.const_shape()) else {
        return Some("a tile's shape is not constant".into());
    };
    let pow2 = |x: i64| matches!(x, 16 | 32 | 64 | 128 | 256);
    if f.launch.threads % 32 != 0 {
        return Some(format!(
            "the block's {} threads are not whole warps",
            f.launch.threads
        ));
    }
    if !pow2(sc[0]) || !steps_of_16(sc[1]) {
        return Some(format!(
            "the accumulator's {}x{} is not 16 to 256 rows (a power of two) by 16 to 256 columns (a multiple of 16)",
            sc[0], sc[1]
        ));
    }
    for (t, s) in [(a, &sa), (b, &sb)] {
        if t.scope == Scope::Shared && !swizzle_ok(s) {
            return Some(format!(
                "`{}` has {} rows of {} elements: the swizzle needs whole 8-row groups of 16 to 256 (a power of two)",
                t.name, s[0], s[1]
            ));
        }
    }
    None
}
