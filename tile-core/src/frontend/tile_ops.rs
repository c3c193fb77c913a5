//! The tile ops: statements over whole tiles (`T::copy`, `T::clear`,
//! `T::fill`, `T::gemm`, `T::atomic_add`; the reductions and `T::cumsum`
//! are in `reductions`).
//! Each checks its operands' scopes, shapes and dtypes here, so that the
//! passes get only tile ops they can lower.

use super::builtins::Call;
use super::{expr, limits, Ctx};
use crate::diag::{range, At, SpanRange as Span};
use crate::ir::*;

/// The source or destination of `T::copy` before its extent is known.
struct RegionRef {
    buf: BufId,
    /// `Some` for `buf.at([..])`; `None` for the whole buffer.
    origin: Option<Vec<Expr>>,
    span: Span,
}

fn region_ref(cx: &mut Ctx, e: &syn::Expr) -> Option<RegionRef> {
    match e {
        syn::Expr::MethodCall(m) if m.method == "at" => {
            let buf = expr::buffer_ref(cx, &m.receiver)?;
            let parts = match m.args.iter().collect::<Vec<_>>().as_slice() {
                [one] => expr::elems(one),
                a => a.to_vec(),
            };
            let mut fits = true;
            let origin: Vec<Expr> = parts
                .iter()
                .map(|p| {
                    let v = expr::lower(cx, p);
                    if !v.dtype().is_int() {
                        cx.err(range(&p), "tile origins are integers");
                    }
                    if let Some(c) = v.as_int() {
                        fits &= limits::index_fits(cx, At::Expr(p), c, "the origin");
                    }
                    v.cast(DType::I32)
                })
                .collect();
            if !fits {
                return None;
            }
            let rank = cx.f.buf(buf).shape.len();
            if origin.len() != rank {
                let n = cx.f.buf(buf).name.clone();
                cx.err(
                    range(&m),
                    format!(
                        "`{n}` has {rank} dim(s) but `.at()` gives {} coordinate(s)",
                        origin.len()
                    ),
                );
                return None;
            }
            Some(RegionRef {
                buf,
                origin: Some(origin),
                span: range(&e),
            })
        }
        syn::Expr::MethodCall(m) => {
            cx.err(
                range(&m.method),
                format!(
                    "unknown method `.{}()`; a tile is `buffer` or `buffer.at([origin..])`",
                    m.method
                ),
            );
            None
        }
        _ => {
            let buf = expr::buffer_ref(cx, e)?;
            Some(RegionRef {
                buf,
                origin: None,
                span: range(&e),
            })
        }
    }
}

/// Whether tile op `k` stands where a tile op may: not inside a
/// `T::parallel` loop, whose body runs once per element (reported if it is).
pub(super) fn whole_tile_op(cx: &mut Ctx, k: &Call) -> bool {
    if cx.parallel_depth > 0 {
        cx.err(
            k.span(),
            format!(
                "`T::{}` works on whole tiles and cannot run inside a `T::parallel` loop, whose \
                 body runs once per element; move it before or after the loop",
                k.name()
            ),
        );
        return false;
    }
    true
}

/// Whether none of `bufs` holds packed pairs, else an error at the op: a
/// pair is a value for paired arithmetic, and the tile ops that combine
/// elements (gemm, reductions, scans) have no paired form.
pub(super) fn no_pairs(cx: &mut Ctx, span: Span, op: &str, bufs: &[&Buffer]) -> bool {
    match bufs.iter().find(|b| b.dtype.is_packed()) {
        Some(b) => {
            cx.err(
                span,
                format!(
                    "`T::{op}` does not take packed pairs (`{}` holds {}); unpack the halves \
                     with `T::low` and `T::high` into a buffer of {}",
                    b.name,
                    b.dtype,
                    b.dtype.lane()
                ),
            );
            false
        }
        None => true,
    }
}

/// `T::copy(src, dst)`, with the options `instruction = ".."` and
/// `pad = v`, in either order.
pub(super) fn copy(cx: &mut Ctx, k: &Call, out: &mut Vec<Stmt>) {
    if !whole_tile_op(cx, k) {
        return;
    }
    let (Some(src), Some(dst)) = (region_ref(cx, k.args[0]), region_ref(cx, k.args[1])) else {
        return;
    };
    let mut prefer = CopyPref::Auto;
    let mut pad_arg = None;
    let mut seen = Vec::new();
    for &kw in &k.args[2..] {
        let Some((key, value)) = copy_option(cx, kw, &mut seen) else {
            return;
        };
        match key {
            "instruction" => match copy_instruction(cx, value) {
                Some(p) => prefer = p,
                None => return,
            },
            _ => pad_arg = Some(value),
        }
    }
    let (src_buf, dst_buf) = (src.buf, dst.buf);
    let Some(mut s) = resolve_copy(cx, src, dst, k.span()) else {
        return;
    };
    let pad = match pad_arg {
        Some(e) => match copy_pad(cx, e, src_buf, dst_buf, prefer) {
            Some(p) => p,
            None => return,
        },
        None => None,
    };
    if let Stmt::Copy {
        prefer: p, pad: d, ..
    } = &mut s
    {
        *p = prefer;
        *d = pad;
    }
    out.push(s);
}

/// One `name = value` option of `T::copy`: its name (`instruction` or
/// `pad`, each at most once) and value.
fn copy_option<'a>(
    cx: &mut Ctx,
    kw: &'a syn::Expr,
    seen: &mut Vec<&'static str>,
) -> Option<(&'static str, &'a syn::Expr)> {
    let syn::Expr::Assign(a) = kw else {
        cx.err(
            range(kw),
            "the optional arguments of `T::copy` are `instruction = ..` and `pad = ..`",
        );
        return None;
    };
    let key = match &*a.left {
        syn::Expr::Path(p) if p.path.is_ident("instruction") => "instruction",
        syn::Expr::Path(p) if p.path.is_ident("pad") => "pad",
        _ => {
            cx.err(
                range(&a.left),
                "unknown `T::copy` option; the options are `instruction` and `pad`",
            );
            return None;
        }
    };
    if seen.contains(&key) {
        cx.err(range(&a.left), format!("`{key}` is given twice"));
        return None;
    }
    seen.push(key);
    Some((key, &a.right))
}

/// The value of `instruction = "tma" | "cp_async" | "loops"`.
fn copy_instruction(cx: &mut Ctx, value: &syn::Expr) -> Option<CopyPref> {
    let names = CopyPref::NAMES.map(|(n, _)| format!("\"{n}\"")).join(", ");
    let pref = match value {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => CopyPref::from_name(&s.value()),
        _ => None,
    };
    if pref.is_none() {
        cx.err(range(value), format!("`instruction` is one of {names}"));
    }
    pref
}

/// `pad = v`: the value, in `dst`'s dtype, that elements read from outside
/// the source tensor become. `Some(None)` for a pad of zero, which every
/// copy already gives (so the copy may still be a tile copy).
fn copy_pad(
    cx: &mut Ctx,
    e: &syn::Expr,
    src: BufId,
    dst: BufId,
    prefer: CopyPref,
) -> Option<Option<Expr>> {
    let (sb, db) = (cx.f.buf(src).clone(), cx.f.buf(dst).clone());
    if sb.scope != Scope::Global {
        cx.err(
            range(e),
            format!(
                "`pad` is for copies that read a tensor argument, whose edge a tile may cross; \
                 `{}` is a {} buffer, never read out of bounds",
                sb.name,
                sb.scope.name()
            ),
        );
        return None;
    }
    let v = expr::lower(cx, e);
    let what = format!("buffer `{}`", db.name);
    let v = expr::convert_for_store(cx, At::Expr(e), v, db.dtype, &what);
    let zero = match &v {
        Expr::Int(0, _) => true,
        // +0.0 only: a pad of -0.0 differs from the zero fill in its sign.
        Expr::Float(x, _) => *x == 0.0 && x.is_sign_positive(),
        _ => false,
    };
    if zero {
        return Some(None);
    }
    if matches!(prefer, CopyPref::CpAsync | CopyPref::Tma) {
        cx.err(
            range(e),
            format!(
                "`instruction = \"{}\"` fills the tile's part outside the tensor with zeros; a \
                 copy with another `pad` runs as loops",
                prefer.name()
            ),
        );
        return None;
    }
    Some(Some(v))
}

/// `T::fill(buf, value)`, and `T::clear(buf)` (`value: None`, zero).
pub(super) fn fill(cx: &mut Ctx, k: &Call, value: Option<&syn::Expr>, out: &mut Vec<Stmt>) {
    if !whole_tile_op(cx, k) {
        return;
    }
    let Some(r) = region_ref(cx, k.args[0]) else {
        return;
    };
    let b = cx.f.buf(r.buf).clone();
    if r.origin.is_some() {
        cx.err(r.span, format!("`T::{}` takes a whole buffer", k.name()));
        return;
    }
    if !expr::check_writable(cx, r.buf, r.span) {
        return;
    }
    let value = match value {
        None => Expr::Int(0, DType::I32).cast(b.dtype),
        Some(e) => {
            let v = expr::lower(cx, e);
            expr::convert_for_store(cx, At::Expr(e), v, b.dtype, &format!("buffer `{}`", b.name))
        }
    };
    let origin = vec![Expr::int(0); b.shape.len()];
    out.push(Stmt::Fill {
        loc: cx.loc,
        dst: Region {
            buf: r.buf,
            origin,
            extent: b.shape.clone(),
        },
        value,
    });
}

/// `T::gemm(a, b, c, transpose_a = .., transpose_b = .., clear_accum = ..)`.
pub(super) fn gemm(cx: &mut Ctx, k: &Call, out: &mut Vec<Stmt>) {
    if !whole_tile_op(cx, k) {
        return;
    }
    let bufs: Vec<Option<BufId>> = k.args[..3]
        .iter()
        .map(|a| expr::buffer_ref(cx, a))
        .collect();
    let mut g = Gemm {
        loc: cx.loc,
        inst: GemmInst::Loops,
        a: BufId(0),
        b: BufId(0),
        c: BufId(0),
        trans_a: false,
        trans_b: false,
        clear: false,
        why: None,
    };
    for kw in &k.args[3..] {
        let syn::Expr::Assign(a) = kw else {
            cx.err(range(&kw), "optional `T::gemm` arguments are `transpose_a = bool`, `transpose_b = bool`, `clear_accum = bool`");
            continue;
        };
        let key = match &*a.left {
            syn::Expr::Path(p) => p
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default(),
            _ => String::new(),
        };
        let val = match expr::lower(cx, &a.right) {
            Expr::Bool(v) => v,
            _ => {
                cx.err(range(&a.right), "gemm flags are compile-time bools");
                continue;
            }
        };
        match key.as_str() {
            "transpose_a" => g.trans_a = val,
            "transpose_b" => g.trans_b = val,
            "clear_accum" => g.clear = val,
            _ => cx.err(range(&a.left), format!("unknown `T::gemm` option `{key}`; options are transpose_a, transpose_b, clear_accum")),
        }
    }
    let [Some(a), Some(b), Some(cc)] = bufs[..] else {
        return;
    };
    g.a = a;
    g.b = b;
    g.c = cc;
    if let Some(s) = gemm_check(cx, g, k.span()) {
        out.push(s);
    }
}

fn gemm_check(cx: &mut Ctx, g: Gemm, span: Span) -> Option<Stmt> {
    let (a, b, c) = (
        cx.f.buf(g.a).clone(),
        cx.f.buf(g.b).clone(),
        cx.f.buf(g.c).clone(),
    );
    if !no_pairs(cx, span, "gemm", &[&a, &b, &c]) {
        return None;
    }
    let shapes = (a.const_shape(), b.const_shape(), c.const_shape());
    let (Some(sa), Some(sb), Some(sc)) = shapes else {
        cx.err(
            span,
            "`T::gemm` operands are on-chip tiles (shared or fragment buffers)",
        );
        return None;
    };
    if [&a, &b, &c].iter().any(|x| x.scope == Scope::Global) {
        cx.err(
            span,
            "`T::gemm` operands are on-chip tiles: copy global tiles into shared memory first",
        );
        return None;
    }
    if sa.len() != 2 || sb.len() != 2 || sc.len() != 2 {
        cx.err(span, "`T::gemm` takes 2-D tiles");
        return None;
    }
    let (m, ka) = if g.trans_a {
        (sa[1], sa[0])
    } else {
        (sa[0], sa[1])
    };
    let (kb, n) = if g.trans_b {
        (sb[1], sb[0])
    } else {
        (sb[0], sb[1])
    };
    if ka != kb || sc[0] != m || sc[1] != n {
        cx.err(
            span,
            format!(
                "`T::gemm` shapes do not agree: {} is {:?}, {} is {:?}, {} is {:?} (want [M, K] x [K, N] -> [M, N])",
                a.name, sa, b.name, sb, c.name, sc
            ),
        );
        return None;
    }
    if c.scope != Scope::Fragment {
        cx.err(
            span,
            format!(
                "the `T::gemm` accumulator `{}` is a fragment (`T::alloc_fragment`)",
                c.name
            ),
        );
        return None;
    }
    // f8 operands (either format, as `wgmma` takes them) accumulate in f32.
    let f8 = a.dtype.is_f8() && b.dtype.is_f8() && c.dtype == DType::F32;
    let ok = f8
        || (a.dtype == b.dtype)
            && matches!(
                (a.dtype, c.dtype),
                (DType::F16 | DType::BF16, DType::F32)
                    | (DType::F16, DType::F16)
                    | (DType::F32, DType::F32)
                    | (DType::F64, DType::F64)
                    | (DType::I8 | DType::U8, DType::I32)
            );
    if !ok {
        cx.err(
            span,
            format!(
                "`T::gemm` supports f16/bf16 -> f32, f8 (e4m3, e5m2) -> f32, f16 -> f16, f32 -> f32, \
                 f64 -> f64 and i8 -> i32; got {} x {} -> {}",
                a.dtype, b.dtype, c.dtype
            ),
        );
        return None;
    }
    Some(Stmt::Gemm(g))
}

/// Resolves the extents of `T::copy`: the side given as a whole buffer gives
/// the shape; `.at([..])` gives only an origin. Leading unit dims align a
/// lower-rank tile with a higher-rank region (e.g. a row of a matrix).
fn resolve_copy(cx: &mut Ctx, src: RegionRef, dst: RegionRef, span: Span) -> Option<Stmt> {
    let sb = cx.f.buf(src.buf).clone();
    let db = cx.f.buf(dst.buf).clone();
    if !expr::check_writable(cx, dst.buf, dst.span) {
        return None;
    }
    // A copy converts element by element; a pair converts to nothing else.
    if (sb.dtype.is_packed() || db.dtype.is_packed()) && sb.dtype != db.dtype {
        cx.err(
            span,
            format!(
                "`T::copy` from `{}` ({}) to `{}` ({}): a packed pair is copied only into pairs \
                 of its dtype; unpack the halves with `T::low` and `T::high` in a `T::parallel` loop",
                sb.name, sb.dtype, db.name, db.dtype
            ),
        );
        return None;
    }
    let shape_of = |r: &RegionRef, b: &Buffer| {
        if r.origin.is_none() {
            Some(b.shape.clone())
        } else {
            None
        }
    };
    let tile = match (shape_of(&dst, &db), shape_of(&src, &sb)) {
        (Some(d), Some(s)) => {
            let (dc, sc) = (db.const_shape(), sb.const_shape());
            let squeeze = |v: &[i64]| {
                v.iter()
                    .copied()
                    .skip_while(|&x| x == 1)
                    .collect::<Vec<_>>()
            };
            match (dc, sc) {
                (Some(dc), Some(sc)) if squeeze(&dc) != squeeze(&sc) => {
                    cx.err(
                        span,
                        format!(
                            "`T::copy` between incompatible tiles: `{}` is {:?} but `{}` is {:?}",
                            sb.name, sc, db.name, dc
                        ),
                    );
                    return None;
                }
                (Some(dc), Some(_)) => {
                    let sq = squeeze(&dc);
                    if sq.is_empty() {
                        vec![Expr::int(1)]
                    } else {
                        sq.into_iter().map(Expr::int).collect()
                    }
                }
                _ if d == s => d,
                _ => {
                    cx.err(span, format!("`T::copy` between `{}` and `{}`: shapes cannot be shown equal; give one side as `.at([..])`", sb.name, db.name));
                    return None;
                }
            }
        }
        (Some(d), None) => d,
        (None, Some(s)) => s,
        (None, None) => {
            cx.err(
                span,
                "`T::copy` needs one side as a whole tile to give the shape; both are `.at([..])`",
            );
            return None;
        }
    };
    let make = |cx: &mut Ctx, r: RegionRef, b: &Buffer| -> Option<Region> {
        let rank = b.shape.len();
        if tile.len() > rank {
            cx.err(
                r.span,
                format!("`T::copy` between incompatible tiles: the tile has {} dims but `{}` has {rank}", tile.len(), b.name),
            );
            return None;
        }
        let mut extent = vec![Expr::int(1); rank - tile.len()];
        extent.extend(tile.iter().cloned());
        let origin = r.origin.unwrap_or_else(|| vec![Expr::int(0); rank]);
        for (d, o) in origin.iter().enumerate() {
            if !expr::const_index_ok(cx, r.buf, d, o, r.span.into()) {
                return None;
            }
        }
        if let Some(bs) = b.const_shape() {
            for (d, (o, e)) in origin.iter().zip(&extent).enumerate() {
                if let (Some(o), Some(e)) = (o.as_int(), e.as_int()) {
                    if o.saturating_add(e) > bs[d] || e > bs[d] {
                        cx.err(
                            r.span,
                            format!("`T::copy` between incompatible tiles: the tile does not fit in `{}` (dim {d}: {o}+{e} > {})", b.name, bs[d]),
                        );
                        return None;
                    }
                }
            }
        }
        Some(Region {
            buf: r.buf,
            origin,
            extent,
        })
    };
    let s = make(cx, src, &sb)?;
    let d = make(cx, dst, &db)?;
    Some(Stmt::Copy {
        loc: cx.loc,
        inst: CopyInst::Loops,
        prefer: CopyPref::Auto,
        pad: None,
        src: s,
        dst: d,
    })
}

/// `T::atomic_add(buf[idx], value)` for one element, or
/// `T::atomic_add(dst.at([..]), tile)` for a tile (like `T::copy`, adding).
pub(super) fn atomic_add(cx: &mut Ctx, k: &Call, out: &mut Vec<Stmt>) {
    let args = &k.args;
    let writable = |cx: &mut Ctx, b: BufId, e: &syn::Expr| -> bool {
        if !expr::check_writable(cx, b, range(e)) {
            return false;
        }
        let buf = cx.f.buf(b).clone();
        let cuda_atomic = matches!(
            buf.dtype,
            DType::F16
                | DType::BF16
                | DType::F32
                | DType::F64
                | DType::I32
                | DType::U32
                | DType::I64
                | DType::U64
        );
        if !cuda_atomic {
            cx.err(
                range(e),
                format!(
                    "`T::atomic_add` on {} is not supported (CUDA adds atomically f16, bf16, f32, \
                     f64, i32, u32, i64 and u64)",
                    buf.dtype
                ),
            );
            return false;
        }
        if matches!(buf.scope, Scope::Fragment | Scope::Local) {
            cx.err(
                range(e),
                format!(
                    "`T::atomic_add` targets global or shared memory; `{}` is {}",
                    buf.name,
                    buf.scope.name()
                ),
            );
            return false;
        }
        true
    };
    if let syn::Expr::Index(ix) = args[0] {
        let (buf, idx) = expr::index(cx, ix);
        let v = expr::lower(cx, args[1]);
        let Some(b) = buf else { return };
        if !writable(cx, b, args[0]) {
            return;
        }
        let t = cx.f.buf(b).dtype;
        let name = cx.f.buf(b).name.clone();
        let value =
            expr::convert_for_store(cx, At::Expr(args[1]), v, t, &format!("buffer `{name}`"));
        out.push(Stmt::AtomicAdd {
            loc: cx.loc,
            buf: b,
            idx,
            value,
        });
        return;
    }
    if !whole_tile_op(cx, k) {
        return;
    }
    let (Some(dst), Some(src)) = (region_ref(cx, args[0]), region_ref(cx, args[1])) else {
        return;
    };
    if !writable(cx, dst.buf, args[0]) {
        return;
    }
    if let Some(Stmt::Copy { src, dst, .. }) = resolve_copy(cx, src, dst, k.span()) {
        out.push(Stmt::AtomicAddTile {
            loc: cx.loc,
            src,
            dst,
        });
    }
}
