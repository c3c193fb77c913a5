//! Chooses the tensor-core path for `T::gemm` (CUDA) and the layouts it
//! implies, before tile ops are lowered.
//!
//! A gemm qualifies when its operands are shared f16/bf16 tiles and its
//! accumulator an f32 fragment of a shape `tl::gemm_ss` supports, and the
//! accumulator is only used whole (fill, copy, gemm) or by its owner
//! (`T::parallel` over its shape, indexed by the loop variables). Then the
//! accumulator gets `Layout::Mma` (registers as `mma.sync` leaves them), the
//! operands `Layout::Swizzled`, and so does every fragment of the same shape
//! that shares a `T::parallel` nest with the accumulator (its elements must
//! sit in the same threads). Otherwise the gemm stays on the portable path
//! (a scalar dot product per element). Several gemms may accumulate into one
//! fragment: each one that qualifies runs on tensor cores, the others stay
//! portable over the same register layout.
//!
//! On Hopper (`PrimFunc::arch` sm_90a) a gemm that `wgmma` can run takes it
//! instead: the accumulator gets `Layout::Wgmma` and the operands
//! `Layout::WgmmaOperand`, the layouts `wgmma`'s descriptors read. What rules
//! `wgmma` out (fewer than 64 rows per warpgroup, a block that is not whole
//! warpgroups, N over 256 or not a multiple of 8, operand rows that are not
//! whole 128-byte panels) leaves the gemm on `mma.sync` when that qualifies.

use crate::analysis::ownership::owner_access;
use crate::diag::Diagnostic;
use crate::ir::*;
use std::collections::BTreeSet;

pub fn run(mut f: PrimFunc) -> Result<PrimFunc, Diagnostic> {
    let mut gemms = Vec::new();
    f.body.visit(&mut |s| {
        if let Stmt::Gemm(g) = s {
            gemms.push(g.clone());
        }
    });
    // Per accumulator: its layout depends only on its shape and the block
    // size, so every qualifying gemm into it agrees on it.
    for g in &gemms {
        if f.buf(g.c).layout.is_some() {
            continue;
        }
        let Some(acc_layout) = eligible(&f, g) else {
            continue;
        };
        // The accumulator and every fragment tied to it through a nest.
        let mut group = BTreeSet::from([g.c]);
        loop {
            let before = group.len();
            let mut add = Vec::new();
            f.body.visit(&mut |s| {
                if let Some(Nest { body, .. }) = s.parallel_nest() {
                    let used = fragments_in(&f, body);
                    if used.iter().any(|b| group.contains(b)) {
                        add.extend(used);
                    }
                }
            });
            group.extend(add);
            if group.len() == before {
                break;
            }
        }
        let shape = f.buf(g.c).const_shape();
        let ok = group.iter().all(|&b| {
            f.buf(b).const_shape() == shape
                && f.buf(b).layout.is_none()
                && owner_only(&f, b, &f.body)
        });
        if !ok {
            continue;
        }
        for b in group {
            f.buffers[b.0 as usize].layout = Some(acc_layout);
        }
    }
    // Every gemm that runs on tensor cores reads its operands in the layout
    // of its instruction. A gemm that does not qualify, or whose operand
    // another tensor-core gemm wants in another layout, but accumulates into
    // a tensor-core accumulator stays portable: its loop nest visits the
    // accumulator's registers.
    let mut operand = std::collections::BTreeMap::new();
    let mut clash = BTreeSet::new();
    for g in gemms.iter().filter(|g| on_tensor_cores(&f, g)) {
        let want = operand_layout(f.buf(g.c).layout);
        for t in [g.a, g.b] {
            if *operand.entry(t).or_insert(want) != want {
                clash.insert(t);
            }
        }
    }
    for (&t, &l) in operand.iter().filter(|(t, _)| !clash.contains(*t)) {
        f.buffers[t.0 as usize].layout = Some(l);
    }
    // Record the choice on each gemm: later passes and the backend read it.
    let body = std::mem::replace(&mut f.body, Stmt::Seq(Vec::new()));
    f.body = body.fold(&mut |s| match s {
        Stmt::Gemm(mut g) => {
            let clashes = clash.contains(&g.a) || clash.contains(&g.b);
            if on_tensor_cores(&f, &g) && !clashes {
                g.inst = match f.buf(g.c).layout {
                    Some(Layout::Mma { wm, wn }) => GemmInst::MmaSync { wm, wn },
                    Some(Layout::Wgmma { wgs }) => GemmInst::Wgmma { wgs },
                    _ => GemmInst::Loops,
                };
            }
            Stmt::Gemm(g)
        }
        s => s,
    });
    Ok(f)
}

/// The operand layout the instruction behind an accumulator layout reads.
fn operand_layout(acc: Option<Layout>) -> Layout {
    match acc {
        Some(Layout::Wgmma { .. }) => Layout::WgmmaOperand,
        _ => Layout::Swizzled,
    }
}

/// Whether gemm `g` can run on tensor cores (after the layouts are chosen):
/// its accumulator got a tensor-core layout and it qualifies for that one.
fn on_tensor_cores(f: &PrimFunc, g: &Gemm) -> bool {
    let acc = f.buf(g.c).layout;
    acc.is_some_and(Layout::is_accumulator) && eligible(f, g) == acc
}

fn fragments_in(f: &PrimFunc, s: &Stmt) -> Vec<BufId> {
    let mut v = Vec::new();
    s.visit_exprs(&mut |e| {
        if let Expr::Load(b, _, _) = e {
            v.push(*b);
        }
    });
    s.visit(&mut |x| {
        if let Stmt::Store { buf, .. } = x {
            v.push(*buf);
        }
    });
    v.retain(|&b| f.buf(b).scope == Scope::Fragment);
    v
}

/// The accumulator layout of a gemm on tensor cores, if it qualifies:
/// `wgmma`'s on Hopper when it can run it, else `mma.sync`'s.
fn eligible(f: &PrimFunc, g: &Gemm) -> Option<Layout> {
    let (a, b, c) = (f.buf(g.a), f.buf(g.b), f.buf(g.c));
    let lowp = matches!(a.dtype, DType::F16 | DType::BF16);
    if !lowp || a.dtype != b.dtype || c.dtype != DType::F32 || g.clear {
        return None;
    }
    if a.scope != Scope::Shared || b.scope != Scope::Shared || c.scope != Scope::Fragment {
        return None;
    }
    // `T::annotate_layout(t, T::swizzled)` asks for the layout the gemm
    // reads without bank conflicts: on Hopper that is `wgmma`'s.
    let free = |l: Option<Layout>| l.is_none_or(Layout::is_swizzle);
    if !free(a.layout) || !free(b.layout) {
        return None;
    }
    if f.arch == CudaArch::Sm90a {
        if let Some(wgs) = wgmma_warpgroups(f, g) {
            return Some(Layout::Wgmma { wgs });
        }
    }
    mma_sync_warps(f, g).map(|(wm, wn)| Layout::Mma { wm, wn })
}

/// The warpgroups of a gemm `wgmma` can run (sm_90a): the block is whole
/// warpgroups, each takes at least 64 of the accumulator's rows (one
/// m64nNk16 instruction per 64 rows, N a multiple of 8 up to 256), K is whole
/// k16 steps, and each operand tile's contiguous extent fits a swizzle of
/// the descriptors: 16 or 32 elements (32- or 64-byte swizzle) or whole
/// 128-byte panels of 64, in rows of 8-row groups.
fn wgmma_warpgroups(f: &PrimFunc, g: &Gemm) -> Option<i64> {
    let (a, b, c) = (f.buf(g.a), f.buf(g.b), f.buf(g.c));
    let (sa, sb, sc) = (a.const_shape()?, b.const_shape()?, c.const_shape()?);
    let threads = f.launch.threads;
    let (m, n) = (sc[0], sc[1]);
    let k = if g.trans_a { sa[0] } else { sa[1] };
    let panels = |s: &[i64]| s.len() == 2 && s[0] % 8 == 0 && wgmma_cols(s[1]);
    let wgs = threads / 128;
    let ok = threads % 128 == 0
        && wgs >= 1
        && m % (64 * wgs) == 0
        && n % 8 == 0
        && n <= 256
        && k % 16 == 0
        && panels(&sa)
        && panels(&sb);
    ok.then_some(wgs)
}

/// Whether a tile's contiguous extent has a `wgmma` swizzle (see
/// `Layout::WgmmaOperand`).
pub fn wgmma_cols(cols: i64) -> bool {
    matches!(cols, 16 | 32) || (cols > 0 && cols % 64 == 0)
}

/// The warp arrangement of a gemm `mma.sync` can run (`tl::gemm_ss`).
fn mma_sync_warps(f: &PrimFunc, g: &Gemm) -> Option<(i64, i64)> {
    let (a, b, c) = (f.buf(g.a), f.buf(g.b), f.buf(g.c));
    let (sa, sb, sc) = (a.const_shape()?, b.const_shape()?, c.const_shape()?);
    let (m, n) = (sc[0], sc[1]);
    let k = if g.trans_a { sa[0] } else { sa[1] };
    let swizzle_ok = |s: &[i64]| s[0] % 8 == 0 && matches!(s[1] * 2, 32 | 64 | 128 | 256);
    if !swizzle_ok(&sa) || !swizzle_ok(&sb) || !matches!(k, 16 | 32 | 64) {
        return None;
    }
    if !matches!(m, 64 | 128 | 256) || !matches!(n, 64 | 128 | 256) {
        return None;
    }
    let warps = f.launch.threads / 32;
    let (wm, wn) = match warps {
        4 => (2, 2),
        8 if m >= n => (4, 2),
        8 => (2, 4),
        _ => return None,
    };
    if f.launch.threads % 32 != 0 || (m / wm) % 16 != 0 || (n / wn) % 16 != 0 {
        return None;
    }
    Some((wm, wn))
}

/// Whether every use of fragment `b` keeps it in its owners' registers.
fn owner_only(f: &PrimFunc, b: BufId, s: &Stmt) -> bool {
    let shape = f.buf(b).const_shape().unwrap_or_default();
    let whole = |r: &Region| {
        r.buf != b
            || (r.origin.iter().all(|o| o.as_int() == Some(0))
                && r.extent
                    .iter()
                    .map(Expr::as_int)
                    .collect::<Option<Vec<_>>>()
                    .as_deref()
                    == Some(&shape[..]))
    };
    if let Some(Nest {
        vars,
        extents: ext,
        body,
    }) = s.parallel_nest()
    {
        let mut ok = true;
        body.visit_exprs(&mut |e| {
            if let Expr::Load(x, idx, _) = e {
                ok &= *x != b || owner_access(&shape, idx, &vars, &ext);
            }
        });
        body.visit(&mut |x| match x {
            Stmt::Store { buf, idx, .. } => {
                ok &= *buf != b || owner_access(&shape, idx, &vars, &ext)
            }
            Stmt::Reduce(r) => ok &= r.src != b && r.dst != b,
            _ => {}
        });
        return ok;
    }
    match s {
        Stmt::Seq(v) => v.iter().all(|x| owner_only(f, b, x)),
        Stmt::For { body, .. } => owner_only(f, b, body),
        Stmt::If {
            cond, then, els, ..
        } => {
            !cond.visit_uses(b)
                && owner_only(f, b, then)
                && els.as_ref().is_none_or(|e| owner_only(f, b, e))
        }
        Stmt::Copy { src, dst, .. } => whole(src) && whole(dst),
        Stmt::Fill { dst, value, .. } => whole(dst) && !value.visit_uses(b),
        Stmt::Gemm(g) => g.a != b && g.b != b,
        Stmt::Reduce(r) => r.src != b && r.dst != b,
        Stmt::AtomicAddTile { src, dst, .. } => src.buf != b && dst.buf != b,
        other => {
            let mut used = false;
            other.visit_exprs(&mut |e| used |= matches!(e, Expr::Load(x, _, _) if *x == b));
            if let Stmt::Store { buf, .. } | Stmt::AtomicAdd { buf, .. } = other {
                used |= *buf == b;
            }
            !used
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::frontend::parse_kernel_source;

    /// Two gemms into one accumulator: `k2` = 32 qualifies for tensor cores,
    /// `k2` = 8 does not.
    fn two_gemms(k2: i64) -> String {
        format!(
            r#"
            #[tile::kernel(bm = 64, bn = 64, bk = 32, k2 = {k2}, threads = 128)]
            fn k(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f32, (M, N)>) {{
                T::kernel(1, threads, |bx| {{
                    let a1 = T::alloc_shared::<f16>([bm, bk]);
                    let b1 = T::alloc_shared::<f16>([bk, bn]);
                    let a2 = T::alloc_shared::<f16>([bm, k2]);
                    let b2 = T::alloc_shared::<f16>([k2, bn]);
                    let acc = T::alloc_fragment::<f32>([bm, bn]);
                    T::clear(acc);
                    T::copy(a.at([0, 0]), a1);
                    T::copy(b.at([0, 0]), b1);
                    T::copy(a.at([0, bk]), a2);
                    T::copy(b.at([bk, 0]), b2);
                    T::gemm(a1, b1, acc);
                    T::gemm(a2, b2, acc);
                    T::copy(acc, c.at([0, 0]));
                }});
            }}"#
        )
    }

    fn cuda(src: &str) -> String {
        let def = parse_kernel_source(src).expect("parses");
        crate::compile(def).expect("compiles").cuda_source
    }

    #[test]
    fn every_qualifying_gemm_into_an_accumulator_reads_swizzled_tiles() {
        let src = two_gemms(32);
        let def = parse_kernel_source(&src).expect("parses");
        let f = super::run(def.func).expect("plans");
        for name in ["a1", "b1", "a2", "b2"] {
            let b = f.buffers.iter().find(|b| b.name == name).expect("buffer");
            assert_eq!(b.layout, Some(crate::ir::Layout::Swizzled), "{name}");
        }
        assert_eq!(cuda(&src).matches("tl::gemm_ss<").count(), 2);
    }

    #[test]
    fn a_gemm_that_does_not_qualify_visits_the_tensor_core_layout() {
        let cu = cuda(&two_gemms(8));
        assert_eq!(cu.matches("tl::gemm_ss<").count(), 1, "{cu}");
        // The second gemm is a dot product per element over acc's registers.
        let second = cu.find("tl::gemm_ss<").expect("first gemm");
        let rest = &cu[second..];
        assert!(rest.contains("tl::acc_coord<64, 64, 2, 2>"), "{cu}");
        assert!(rest.contains("for (int k = 0; k < 8; ++k)"), "{cu}");
    }
}
