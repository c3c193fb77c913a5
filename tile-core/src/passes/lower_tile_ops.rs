//! Lowers tile ops into `T::parallel` loop nests over element stores:
//! `T::copy` → `dst[o_d + i] = src[o_s + i]` (converted to dst's dtype),
//! `T::fill`/`T::clear` → `dst[o + i] = v`,
//! `T::gemm` → per accumulator element, a serial dot product over K.
//! `T::atomic_add` of a tile → the copy nest with atomic adds,
//! `T::reduce_*` → loops on the CPU (CUDA keeps the op for its cooperative
//! block reduction).
//! Leading unit dims of a region (a row of a matrix) do not become loops.
//!
//! On CUDA a copy of a 2-D tile of a global tensor into a whole swizzled
//! shared tile (a tensor-core operand) stays a `T::copy`: the backend emits it
//! as `tl::copy_tile` (16-byte `cp.async` chunks, the tensor's edge as their
//! predicate, zero fill), which software pipelines overlap with compute. See
//! [`is_tile_copy`] for exactly which copies. On Hopper such a copy into a
//! `wgmma` operand tile is recorded as a bulk tensor copy where the engine
//! can move it ([`is_tma_copy`]); `plan_pipelines` decides where it does.

use crate::analysis::access::zero_mod;
use crate::analysis::range::Env;
use crate::diag::Diagnostic;
use crate::ir::*;
use crate::Target;
use std::collections::BTreeSet;

pub fn run(mut f: PrimFunc, target: Target) -> Result<PrimFunc, Diagnostic> {
    let signs = signs(&f);
    let body = std::mem::replace(&mut f.body, Stmt::Seq(Vec::new()));
    let mut errs = Vec::new();
    f.body = lower(&mut f, body, target, &signs, &mut errs);
    match errs.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(f),
    }
}

fn lower(
    f: &mut PrimFunc,
    s: Stmt,
    target: Target,
    signs: &Env,
    errs: &mut Vec<Diagnostic>,
) -> Stmt {
    // The nests made from a tile op report errors at the op.
    let loc = s.loc();
    let lowered = match s {
        Stmt::Seq(..) | Stmt::For { .. } | Stmt::If { .. } => {
            return s.map_children(&mut |c| lower(f, c, target, signs, errs))
        }
        Stmt::Copy {
            src,
            dst,
            loc,
            prefer,
            pad: None,
            ..
        } if target == Target::Cuda
            && prefer != CopyPref::Loops
            && is_tile_copy(f, &src, &dst)
            && src.origin.iter().all(|e| signs.non_negative(e)) =>
        {
            let inst = match vector_if(f, &src) {
                Some(v) if prefer != CopyPref::CpAsync && is_tma_copy(f, &src, &dst, prefer) => {
                    CopyInst::Tma { vector_if: v }
                }
                v => CopyInst::CpAsyncTile { vector_if: v },
            };
            // "tma" on Hopper must be a bulk tensor copy; other GPUs have none.
            if prefer == CopyPref::Tma
                && f.arch == CudaArch::Sm90a
                && !matches!(inst, CopyInst::Tma { .. })
            {
                errs.push(Diagnostic::at(loc, format!(
                    "kernel `{}`: `instruction = \"tma\"`: this copy cannot be a bulk tensor copy: it must fill a \
                     whole tile that a `T::gemm` reads on `wgmma` (of 128-byte panels or 64- or 32-byte rows, at most 256 rows) from a \
                     2-D tile of a tensor whose row length and tile origin are provably multiples of 16 bytes",
                    f.name
                )));
            }
            Stmt::Copy {
                loc,
                src,
                dst,
                inst,
                prefer,
                pad: None,
            }
        }
        Stmt::Copy {
            src,
            dst,
            loc,
            prefer: p @ (CopyPref::CpAsync | CopyPref::Tma),
            ..
        } if target == Target::Cuda => {
            errs.push(Diagnostic::at(
                loc,
                format!(
                    "kernel `{}`: `instruction = \"{}\"`: this copy is not a tile copy: {TILE_COPY_RULE}",
                    f.name,
                    p.name()
                ),
            ));
            copy(f, src, dst, None, false)
        }
        Stmt::Copy { src, dst, pad, .. } => copy(f, src, dst, pad, false),
        Stmt::AtomicAddTile { src, dst, .. } => copy(f, src, dst, None, true),
        Stmt::Reduce(r) if target == Target::C => reduce_loops(f, &r),
        Stmt::Fill { dst, value, .. } => {
            let (vars, nest_of) = loop_vars(f, &dst.extent);
            let idx = region_index(&dst, &vars);
            nest_of(Stmt::Store {
                loc: Loc::NONE,
                buf: dst.buf,
                idx,
                value,
            })
        }
        // A gemm `plan_mma` put on tensor cores stays a tile op for codegen.
        Stmt::Gemm(g) if g.inst != GemmInst::Loops => Stmt::Gemm(g),
        Stmt::Gemm(g) => gemm(f, g),
        s => s,
    };
    lowered.inherit_loc(loc)
}

/// Whether `T::copy(src, dst)` is a tile copy that CUDA keeps whole: the
/// region of a global tensor starting at `src`'s origin, a 2-D tile of its
/// last two dims (any leading dims, such as a batch or head index, are single
/// indices), into all of a swizzled shared tile of 2-byte elements of the same
/// dtype (or 1-byte fp8 elements into a `wgmma` operand tile), whose 16-byte
/// chunks of a row divide the block's threads (what `tl::copy_tile`
/// requires: each thread keeps one column of chunks; when the tile's chunks
/// are not a multiple of the threads, the last pass covers the rows left).
/// Rows and columns past the tensor's edge read as
/// zero, as in the guarded nest the copy would otherwise lower to.
pub fn is_tile_copy(f: &PrimFunc, src: &Region, dst: &Region) -> bool {
    let (g, s) = (f.buf(src.buf), f.buf(dst.buf));
    let Some(shape) = s.const_shape() else {
        return false;
    };
    let [rows, cols] = shape[..] else {
        return false;
    };
    let threads = f.launch.threads;
    let ints = |es: &[Expr]| es.iter().map(Expr::as_int).collect::<Option<Vec<i64>>>();
    let rank = g.shape.len();
    let mut tile_extent = vec![1; rank.saturating_sub(2)];
    tile_extent.extend([rows, cols]);
    let epc = chunk_elems(s.dtype);
    let bytes_ok =
        s.dtype.bytes() == 2 || (s.dtype.is_f8() && s.layout == Some(Layout::WgmmaOperand));
    g.scope == Scope::Global
        && rank >= 2
        && src.origin.len() == rank
        && s.scope == Scope::Shared
        && s.layout.is_some_and(Layout::is_swizzle)
        && s.dtype == g.dtype
        && bytes_ok
        && ints(&dst.origin) == Some(vec![0, 0])
        && ints(&dst.extent) == Some(vec![rows, cols])
        && ints(&src.extent) == Some(tile_extent)
        && cols % epc == 0
        && threads % (cols / epc) == 0
}

/// What is known of the signs of `f`'s values, to keep a tile copy whole only
/// from an origin that is never negative: `tl::copy_tile` predicates each
/// chunk by the rows and columns left after the origin, so from a negative
/// origin (a halo's `bx * n - 1`) it would read before the tensor; such a copy
/// becomes a loop nest instead, whose loads the bounds pass checks on both
/// sides. Dims and block indices are non-negative (a dim that is a grid
/// extent, or whose ceildiv is, at least 1), so is a loop variable whose
/// start is, and a `let` whose value is.
fn signs(f: &PrimFunc) -> Env {
    let mut env = Env::at_launch(f);
    let whole = (0, i32::MAX as i64);
    f.body.visit(&mut |s| {
        if let Stmt::Let { var, value } = s {
            env.lets.insert(*var, value.clone());
        }
    });
    let mut loops = Vec::new();
    f.body.visit(&mut |s| {
        if let Stmt::For {
            var, start, extent, ..
        } = s
        {
            loops.push((*var, start.clone(), extent.clone()));
        }
    });
    // Outer loops first (`visit` is parents first): an inner loop's start
    // may name an outer loop's variable.
    for (v, start, extent) in &loops {
        if env.non_negative(start) {
            env.limits.insert(*v, whole);
        }
        env.bound_loop(*v, start, extent);
    }
    // Then the scalars taken modulo an extent (their operands' signs may rest
    // on the loop limits above).
    let lets: Vec<(VarId, Expr)> = env.lets.iter().map(|(v, e)| (*v, e.clone())).collect();
    for (v, value) in &lets {
        env.bound_let(*v, value);
    }
    env
}

/// Elements of `t` in one 16-byte chunk (8 two-byte, 16 one-byte).
pub fn chunk_elems(t: DType) -> i64 {
    16 / t.bytes().max(1)
}

/// Whether the tile copy `src` → `dst` (see [`is_tile_copy`]) can also be a
/// bulk tensor copy (`CopyInst::Tma`): on sm_90a, from a matrix or one matrix
/// of a batch (a tensor with leading dims is a batch of matrices to the
/// engine, zero-filled at each matrix's edge) into a `wgmma` operand tile of 128-byte
/// panels (the engine's 128-byte swizzle writes exactly that layout, one box
/// of a panel's columns, 64 or 128, by all rows per panel; a box has at most
/// 256 rows), or, where the copy asks for `instruction = "tma"`, of 64- or
/// 32-byte rows (a k tile of 32 or 16 two-byte columns, the 64- or 32-byte
/// swizzle).
///
/// Narrow rows are not bulk copies by default: on an H100 at 4096³ (the
/// bench's "k32" rows, `bench/RESULTS.md` 2026-12-08), the 128 × 128 × 32
/// GEMMs on bulk copies ran at 497 (one consumer warpgroup, two blocks a
/// multiprocessor) and 331 TFLOP/s (two warpgroups, one block), against 492
/// and 453 on `cp.async` in an earlier table of the same GPU: no gain, and a
/// loss where one block's three 16 KiB stages are all a multiprocessor has in
/// flight.
pub fn is_tma_copy(f: &PrimFunc, src: &Region, dst: &Region, prefer: CopyPref) -> bool {
    tma_shape_refusal(f, src, dst, prefer).is_none()
}

/// The first condition of [`is_tma_copy`] that the tile copy `src` → `dst`
/// fails, in words.
fn tma_shape_refusal(f: &PrimFunc, src: &Region, dst: &Region, prefer: CopyPref) -> Option<String> {
    let (g, s) = (f.buf(src.buf), f.buf(dst.buf));
    let Some(&[rows, cols]) = s.const_shape().as_deref() else {
        return Some(format!("`{}` is not a 2-D tile of constant shape", s.name));
    };
    let bytes = cols * s.dtype.bytes();
    if f.arch != CudaArch::Sm90a {
        Some("bulk tensor copies need sm_90a".into())
    } else if g.shape.len() < 2 {
        Some(format!("`{}` is not a matrix", g.name))
    } else if s.layout != Some(Layout::WgmmaOperand) {
        Some(format!("`{}` is not a `wgmma` operand tile", s.name))
    } else if bytes % 128 != 0 && bytes != 64 && bytes != 32 {
        // The engine's swizzles span 128, 64 or 32 bytes; the operand layout
        // (`tl::wg::smem_offset`) is one of them for exactly these rows.
        Some(format!(
            "`{}`'s rows are {bytes} bytes: not 32, 64 or whole 128-byte panels",
            s.name
        ))
    } else if bytes % 128 != 0 && prefer != CopyPref::Tma {
        Some(format!(
            "`{}`'s rows are {bytes} bytes, not whole 128-byte panels (narrower rows are a bulk \
             tensor copy only where the copy asks for `instruction = \"tma\"`)",
            s.name
        ))
    } else if rows % 8 != 0 || rows > 256 {
        Some(format!(
            "`{}` has {rows} rows, not whole 8-row groups up to 256",
            s.name
        ))
    } else {
        None
    }
}

/// Why the tile copy `src` → `dst` (one [`is_tile_copy`] accepts) is a
/// `cp.async` tile copy rather than a bulk tensor copy, in words (a
/// pipeline it feeds is then not warp-specialized; `plan_pipelines` says so).
pub fn tma_refusal(f: &PrimFunc, src: &Region, dst: &Region, prefer: CopyPref) -> String {
    if prefer == CopyPref::CpAsync {
        return "it asks for `instruction = \"cp_async\"`".into();
    }
    if vector_if(f, src).is_none() {
        return "its row length or first column is not provably a multiple of 16 bytes".into();
    }
    tma_shape_refusal(f, src, dst, prefer).unwrap_or_else(|| "it is one".into())
}

/// What a copy must be for CUDA to keep it whole (a tile copy, see
/// [`is_tile_copy`]), in words, for the errors and explanations that need it.
pub const TILE_COPY_RULE: &str =
    "a 2-D tile of a global tensor, from an origin that is provably not \
     negative, into a whole swizzled shared tile of its dtype (a tensor-core operand), whose rows' \
     16-byte chunks divide the block's threads";

/// The dynamic dims that must be multiples of 8 for every tile of a tile copy
/// from `src` to move as whole 16-byte chunks (8 two-byte elements): the
/// row length and every tile's first column must be (multiples of 16 for
/// 1-byte elements); `None` when that cannot be shown.
fn vector_if(f: &PrimFunc, src: &Region) -> Option<Vec<VarId>> {
    let dims: BTreeSet<VarId> = f.dims.iter().copied().collect();
    let g = f.buf(src.buf);
    let epc = chunk_elems(g.dtype);
    let c0 = src.origin.last()?;
    let mut need = zero_mod(c0, epc, &dims)?;
    let cols = g.shape.last()?;
    match cols.as_int() {
        Some(n) if n % epc != 0 => return None,
        Some(_) => {}
        None => need.extend(zero_mod(cols, epc, &dims)?),
    }
    Some(need.into_iter().collect())
}

/// Loop variables over the trailing non-unit dims of `extent`, and a function
/// wrapping a body in the parallel nest.
fn loop_vars(f: &mut PrimFunc, extent: &[Expr]) -> (Vec<Option<VarId>>, impl FnOnce(Stmt) -> Stmt) {
    let lead = extent
        .iter()
        .take_while(|e| e.as_int() == Some(1))
        .count()
        .min(extent.len() - 1);
    let mut vars = vec![None; lead];
    let mut loops = Vec::new();
    let names = ["i", "j", "k", "l"];
    for (d, e) in extent.iter().enumerate().skip(lead) {
        let v = f.new_var(names.get(d - lead).copied().unwrap_or("i"), DType::I32);
        vars.push(Some(v));
        loops.push((v, e.clone()));
    }
    let nest = move |body: Stmt| {
        loops.into_iter().rev().fold(body, |b, (v, e)| Stmt::For {
            loc: Loc::NONE,
            var: v,
            start: Expr::int(0),
            extent: e,
            kind: ForKind::Parallel,
            body: Box::new(b),
        })
    };
    (vars, nest)
}

/// Index into region `r` for the tile loop variables `vars` (which align with
/// the region's trailing dims; leading dims stay at the origin).
fn region_index(r: &Region, vars: &[Option<VarId>]) -> Vec<Expr> {
    let tile: Vec<VarId> = vars.iter().flatten().copied().collect();
    let rank = r.origin.len();
    let first_loop = rank - tile.len();
    (0..rank)
        .map(|d| {
            if d >= first_loop {
                Expr::add(
                    r.origin[d].clone(),
                    Expr::Var(tile[d - first_loop], DType::I32),
                )
            } else {
                r.origin[d].clone()
            }
        })
        .collect()
}

/// The nest of a copy (or of an atomic add of a tile). With a `pad`, the
/// value is `padded(src[..], pad)`: `inject_bounds`, which knows which loads
/// may fall outside, makes it a select.
fn copy(f: &mut PrimFunc, src: Region, dst: Region, pad: Option<Expr>, atomic: bool) -> Stmt {
    let (vars, nest_of) = loop_vars(f, &dst.extent);
    let tile: Vec<Option<VarId>> = vars.iter().filter(|v| v.is_some()).copied().collect();
    let sidx = region_index(&src, &tile);
    let didx = region_index(&dst, &tile);
    let st = f.buf(src.buf).dtype;
    let dt = f.buf(dst.buf).dtype;
    let value = Expr::Load(src.buf, sidx, st).cast(dt);
    let value = match pad {
        Some(p) => Expr::Call(Intrin::Padded, vec![value, p], dt),
        None => value,
    };
    nest_of(if atomic {
        Stmt::AtomicAdd {
            loc: Loc::NONE,
            buf: dst.buf,
            idx: didx,
            value,
        }
    } else {
        Stmt::Store {
            loc: Loc::NONE,
            buf: dst.buf,
            idx: didx,
            value,
        }
    })
}

/// A reduction as loops: per output element, a serial combine over `dim`.
fn reduce_loops(f: &mut PrimFunc, r: &Reduce) -> Stmt {
    let (src, dst) = (f.buf(r.src).clone(), f.buf(r.dst).clone());
    let ss = src.const_shape().unwrap_or_default();
    let t = dst.dtype;
    let acc = f.new_var("acc", t);
    let k = f.new_var("k", DType::I32);
    let kv = Expr::Var(k, DType::I32);
    let (outer, sidx, didx) = if ss.len() == 1 {
        (None, vec![kv], vec![Expr::int(0)])
    } else {
        let o = f.new_var("i", DType::I32);
        let ov = Expr::Var(o, DType::I32);
        let sidx = if r.dim == 1 {
            vec![ov.clone(), kv]
        } else {
            vec![kv, ov.clone()]
        };
        (Some((o, ss[1 - r.dim])), sidx, vec![ov])
    };
    let x = Expr::Load(r.src, sidx, src.dtype).cast(t);
    let a = Expr::Var(acc, t);
    let init = if r.clear {
        r.op.identity(t)
    } else {
        Expr::Load(r.dst, didx.clone(), t)
    };
    let body = Stmt::Seq(vec![
        Stmt::Local { var: acc, init },
        Stmt::For {
            loc: Loc::NONE,
            var: k,
            start: Expr::int(0),
            extent: Expr::int(ss[r.dim]),
            kind: ForKind::Serial,
            body: Box::new(Stmt::Assign {
                var: acc,
                value: combine(r.op, a.clone(), x),
            }),
        },
        Stmt::Store {
            loc: Loc::NONE,
            buf: r.dst,
            idx: didx,
            value: a,
        },
    ]);
    match outer {
        None => body,
        Some((o, n)) => Stmt::For {
            loc: Loc::NONE,
            var: o,
            start: Expr::int(0),
            extent: Expr::int(n),
            kind: ForKind::Parallel,
            body: Box::new(body),
        },
    }
}

/// `op(a, x)` for a reduction.
pub fn combine(op: ReduceOp, a: Expr, x: Expr) -> Expr {
    match op {
        ReduceOp::Sum => Expr::add(a, x),
        ReduceOp::AbsSum => Expr::add(a, abs(x)),
        ReduceOp::Max => Expr::bin(BinOp::Max, a, x),
        ReduceOp::Min => Expr::bin(BinOp::Min, a, x),
    }
}

/// `|x|` for any numeric dtype.
pub fn abs(x: Expr) -> Expr {
    let t = x.dtype();
    if t.is_float() {
        Expr::Call(Intrin::Abs, vec![x], t)
    } else {
        let neg = Expr::Neg(Box::new(x.clone()), t);
        Expr::Select(
            Box::new(Expr::lt(x.clone(), Expr::Int(0, t))),
            Box::new(neg),
            Box::new(x),
            t,
        )
    }
}

fn gemm(f: &mut PrimFunc, g: Gemm) -> Stmt {
    let (a, b, c) = (f.buf(g.a).clone(), f.buf(g.b).clone(), f.buf(g.c).clone());
    let sc = c.const_shape().unwrap_or_default();
    let sa = a.const_shape().unwrap_or_default();
    let kdim = if g.trans_a { sa[0] } else { sa[1] };
    let i = f.new_var("i", DType::I32);
    let j = f.new_var("j", DType::I32);
    let k = f.new_var("k", DType::I32);
    let acc = f.new_var("acc", c.dtype);
    let (vi, vj, vk) = (
        Expr::Var(i, DType::I32),
        Expr::Var(j, DType::I32),
        Expr::Var(k, DType::I32),
    );
    let aidx = if g.trans_a {
        vec![vk.clone(), vi.clone()]
    } else {
        vec![vi.clone(), vk.clone()]
    };
    let bidx = if g.trans_b {
        vec![vj.clone(), vk.clone()]
    } else {
        vec![vk.clone(), vj.clone()]
    };
    let prod = Expr::mul(
        Expr::Load(g.a, aidx, a.dtype).cast(c.dtype),
        Expr::Load(g.b, bidx, b.dtype).cast(c.dtype),
    );
    let init = if g.clear {
        Expr::Int(0, DType::I32).cast(c.dtype)
    } else {
        Expr::Load(g.c, vec![vi.clone(), vj.clone()], c.dtype)
    };
    let body = Stmt::Seq(vec![
        Stmt::Local { var: acc, init },
        Stmt::For {
            loc: Loc::NONE,
            var: k,
            start: Expr::int(0),
            extent: Expr::int(kdim),
            kind: ForKind::Serial,
            body: Box::new(Stmt::Assign {
                var: acc,
                value: Expr::add(Expr::Var(acc, c.dtype), prod),
            }),
        },
        Stmt::Store {
            loc: Loc::NONE,
            buf: g.c,
            idx: vec![vi, vj],
            value: Expr::Var(acc, c.dtype),
        },
    ]);
    let inner = Stmt::For {
        loc: Loc::NONE,
        var: j,
        start: Expr::int(0),
        extent: Expr::int(sc[1]),
        kind: ForKind::Parallel,
        body: Box::new(body),
    };
    Stmt::For {
        loc: Loc::NONE,
        var: i,
        start: Expr::int(0),
        extent: Expr::int(sc[0]),
        kind: ForKind::Parallel,
        body: Box::new(inner),
    }
}

#[cfg(test)]
mod tests {
    use crate::frontend::parse_kernel_source;

    #[test]
    fn copy_becomes_parallel_nest() {
        let src = r#"
            #[tile::kernel(bm = 4, bn = 8, threads = 32)]
            fn k(a: Tensor<f16, (M, N)>, c: TensorMut<f32, (M, N)>) {
                T::kernel([T::ceildiv(N, bn), T::ceildiv(M, bm)], threads, |bx, by| {
                    let t = T::alloc_shared::<f16>([bm, bn]);
                    T::copy(a.at([by * bm, bx * bn]), t);
                    T::copy(t, c.at([by * bm, bx * bn]));
                });
            }"#;
        let f = parse_kernel_source(src).expect("parses").func;
        let f = super::run(f, crate::Target::C).expect("lowers");
        let s = f.script();
        assert!(s.contains("for i in T.Parallel(0, 4):"), "{s}");
        assert!(
            s.contains("t[i, j] = a[((by * 4) + i), ((bx * 8) + j)]"),
            "{s}"
        );
        assert!(s.contains("T.Cast(\"float32\", t[i_1, j_1])"), "{s}");
    }

    /// The operand copies of a tensor-core gemm stay whole on CUDA (for
    /// `tl::copy_tile`), and only those: the CPU lowers them, and the copy out
    /// of the accumulator is a nest on both targets.
    #[test]
    fn tile_copies_stay_whole_on_cuda_only() {
        let src = r#"
            #[tile::kernel(bm = 64, bn = 64, bk = 32, threads = 128)]
            fn k(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f16, (M, N)>) {
                T::kernel([T::ceildiv(N, bn), T::ceildiv(M, bm)], threads, |bx, by| {
                    let a_s = T::alloc_shared::<f16>([bm, bk]);
                    let b_s = T::alloc_shared::<f16>([bk, bn]);
                    let acc = T::alloc_fragment::<f32>([bm, bn]);
                    T::clear(acc);
                    for ko in T::serial(T::ceildiv(K, bk)) {
                        T::copy(a.at([by * bm, ko * bk]), a_s);
                        T::copy(b.at([ko * bk, bx * bn]), b_s);
                        T::gemm(a_s, b_s, acc);
                    }
                    T::copy(acc, c.at([by * bm, bx * bn]));
                });
            }"#;
        let f = parse_kernel_source(src).expect("parses").func;
        let cuda = crate::passes::run(f.clone(), crate::Target::Cuda)
            .expect("lowers")
            .script();
        assert_eq!(cuda.matches("T.copy(").count(), 2, "{cuda}");
        assert!(
            cuda.contains(
                "T.copy(a[(by * 64), (ko * 32); 64, 32], a_s[0, 0; 64, 32], inst=\"cp_async_tile\", vector_if=(K))"
            ),
            "{cuda}"
        );
        let c = crate::passes::run(f, crate::Target::C)
            .expect("lowers")
            .script();
        assert!(!c.contains("T.copy("), "{c}");
        // A batched operand: a single index into the leading dim, a tile of the last two.
        let src = r#"
            #[tile::kernel(bm = 64, bn = 64, d = 64, threads = 128)]
            fn k(q: Tensor<f16, (B, S, d)>, k: Tensor<f16, (B, S, d)>, c: TensorMut<f32, (B, S, S)>) {
                T::kernel([T::ceildiv(S, bn), T::ceildiv(S, bm), B], threads, |bx, by, bz| {
                    let q_s = T::alloc_shared::<f16>([bm, d]);
                    let k_s = T::alloc_shared::<f16>([bn, d]);
                    let acc = T::alloc_fragment::<f32>([bm, bn]);
                    T::clear(acc);
                    T::copy(q.at([bz, by * bm, 0]), q_s);
                    T::copy(k.at([bz, bx * bn, 0]), k_s);
                    T::gemm(q_s, k_s, acc, transpose_b = true);
                    T::copy(acc, c.at([bz, by * bm, bx * bn]));
                });
            }"#;
        let f = parse_kernel_source(src).expect("parses").func;
        let cuda = crate::passes::run(f, crate::Target::Cuda)
            .expect("lowers")
            .script();
        assert!(
            cuda.contains(
                "T.copy(q[bz, (by * 64), 0; 1, 64, 64], q_s[0, 0; 64, 64], inst=\"cp_async_tile\")"
            ),
            "{cuda}"
        );
        assert_eq!(cuda.matches("T.copy(").count(), 2, "{cuda}");
    }
}
