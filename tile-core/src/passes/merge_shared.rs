//! Places every shared buffer in one byte array, letting buffers whose live
//! ranges do not overlap use the same bytes (CUDA).
//!
//! Why a pass of its own: a kernel often works in phases (tiles of A and B
//! for a GEMM main loop, then a staging tile for the epilogue); giving each
//! buffer its own bytes makes the block need the sum of all of them, which
//! lowers occupancy or exceeds the limit, while at any moment only the peak
//! is live. Deciding the placement needs the final set of shared buffers
//! (after `demote_fragments`), and `insert_barriers` needs the placement to
//! order the reuse, so it runs between the two.
//!
//! Live ranges are taken over the statement order of the kernel body: a
//! buffer is live from its first to its last access, and a buffer accessed
//! inside a loop it is not declared in is live for the whole loop (the next
//! iteration reads it again). A `T::parallel` nest is one statement. A tile a
//! pipeline multi-buffers reserves `stages` copies.
//!
//! Placement: largest first, each at the lowest offset (a multiple of
//! `ALIGN`) whose bytes no already placed buffer with an overlapping live
//! range holds. The array's size is then the peak of what is live, up to
//! padding and fragmentation, instead of the sum. Buffers under `ALIGN`
//! bytes (reduction results, scalars) are treated as live throughout:
//! reusing their bytes saves almost nothing and costs a barrier.

use super::insert_barriers::accesses;
use crate::diag::Diagnostic;
use crate::ir::*;
use std::collections::{BTreeMap, BTreeSet};

/// Alignment of every buffer's offset, in bytes. 16 is what 128-bit vector
/// accesses, `cp.async` of 16 bytes and `ldmatrix` rows need; 128 keeps the
/// swizzled tiles' bank pattern, computed from the tile's start, identical
/// to the one it has at an absolute 128-byte boundary.
pub const ALIGN: i64 = 128;

/// Alignment of a tile `wgmma` reads (`Layout::WgmmaOperand`): the period of
/// its 128-byte swizzle (8 rows of 128 bytes).
pub const WGMMA_ALIGN: i64 = 1024;

pub fn run(mut f: PrimFunc) -> Result<PrimFunc, Diagnostic> {
    let stages = f.schedule.multibuffered();
    let live = live_ranges(&f);
    let requests: Vec<Request> = live
        .into_iter()
        .map(|(buf, live)| {
            let b = f.buf(buf);
            let copies = stages.get(&buf).copied().unwrap_or(1);
            let bytes = b.const_bytes() * copies;
            // A buffer smaller than one alignment unit keeps its own bytes:
            // sharing them would save at most `ALIGN` bytes and cost a barrier.
            let live = if bytes < ALIGN { (0, usize::MAX) } else { live };
            // `wgmma` reads its tiles through descriptors whose 128-byte
            // swizzle repeats every 1024 bytes from an aligned base.
            let align = match b.layout {
                Some(Layout::WgmmaOperand) => WGMMA_ALIGN,
                _ => ALIGN,
            };
            Request {
                buf,
                bytes,
                live,
                align,
            }
        })
        .collect();
    f.smem = assign(&requests, ALIGN);
    if f.smem.bytes > MAX_SHARED {
        return Err(over_limit(&f, &requests));
    }
    Ok(f)
}

/// Shared memory a block may use with the opt-in limit of sm_90 (H100/H200).
pub const MAX_SHARED: i64 = 227 * 1024;

/// The error for a kernel whose shared memory does not fit, at the largest
/// buffer's allocation (the one to shrink first).
fn over_limit(f: &PrimFunc, requests: &[Request]) -> Diagnostic {
    let mut largest: Vec<&Request> = requests.iter().collect();
    largest.sort_by_key(|r| std::cmp::Reverse(r.bytes));
    let list: Vec<String> = largest
        .iter()
        .take(4)
        .map(|r| format!("`{}` {} bytes", f.buf(r.buf).name, r.bytes))
        .collect();
    let mut loc = Loc::NONE;
    if let Some(big) = largest.first() {
        f.body.visit(&mut |s| {
            if let Stmt::Alloc { buf, loc: l } = s {
                if *buf == big.buf {
                    loc = *l;
                }
            }
        });
    }
    Diagnostic::at(
        loc,
        format!(
            "kernel `{}` needs {} bytes of shared memory ({}; pipelined tiles count once per stage); \
             a block can have at most {MAX_SHARED}",
            f.name,
            f.smem.bytes,
            list.join(", ")
        ),
    )
}

/// A buffer to place: its size and live range (first and last statement,
/// inclusive).
#[derive(Debug, Clone, Copy)]
pub struct Request {
    pub buf: BufId,
    pub bytes: i64,
    pub live: (usize, usize),
    /// The offset's alignment: `ALIGN` or a multiple of it.
    pub align: i64,
}

/// Offsets for `requests` such that buffers with overlapping live ranges
/// get disjoint bytes.
pub fn assign(requests: &[Request], align: i64) -> SharedPool {
    let round = |x: i64| (x + align - 1) / align * align;
    let mut order: Vec<&Request> = requests.iter().collect();
    // Largest first; ties in program order, so the result is deterministic.
    order.sort_by_key(|r| (-r.bytes, r.live.0, r.buf));
    let mut placed: Vec<(&Request, i64)> = Vec::new();
    for r in order {
        let size = round(r.bytes.max(1));
        let mut busy: Vec<(i64, i64)> = placed
            .iter()
            .filter(|(p, _)| p.live.0 <= r.live.1 && r.live.0 <= p.live.1)
            .map(|(p, off)| (*off, off + round(p.bytes.max(1))))
            .collect();
        busy.sort();
        let up = |x: i64| (x + r.align - 1) / r.align * r.align;
        let mut off = 0;
        for (lo, hi) in busy {
            if off + size <= lo {
                break;
            }
            off = up(off.max(hi));
        }
        placed.push((r, off));
    }
    let mut pool = SharedPool::default();
    for (r, off) in placed {
        pool.slots.insert(r.buf, (off, r.bytes));
        pool.bytes = pool.bytes.max(round(off + r.bytes));
    }
    pool
}

/// Live range of every allocated shared buffer, in statement positions.
fn live_ranges(f: &PrimFunc) -> BTreeMap<BufId, (usize, usize)> {
    let mut w = Walk {
        f,
        pos: 0,
        loops: Vec::new(),
        parents: Vec::new(),
        open: Vec::new(),
        allocs: BTreeMap::new(),
        uses: Vec::new(),
    };
    w.stmt(&f.body);
    let mut live: BTreeMap<BufId, (usize, usize)> = w
        .allocs
        .iter()
        .map(|(&b, (at, _))| (b, (*at, *at)))
        .collect();
    let mut first_use = BTreeSet::new();
    for (b, at, open) in &w.uses {
        let Some((_, declared_in)) = w.allocs.get(b) else {
            continue;
        };
        // The outermost loop around the use that does not also hold the
        // declaration: the buffer is live for all of it.
        let (lo, hi) = match open.iter().find(|l| !declared_in.contains(l)) {
            Some(&l) => w.loops[l],
            None => (*at, *at),
        };
        let e = live.entry(*b).or_insert((lo, hi));
        if first_use.insert(*b) {
            *e = (lo, hi);
        } else {
            *e = (e.0.min(lo), e.1.max(hi));
        }
    }
    // A persistent warp-specialized pipeline's producer fills the next
    // tile's stages while the consumers run this tile's epilogue: its tiles
    // are live for the whole loop around it. It copies the next tile's
    // prologue tiles as soon as the consumers release this tile's, which is
    // before they start the next body: there those tiles are being written
    // from the body's first statement on, not from where their copy stands,
    // so they are live from the start of the loop's body.
    for (var, p) in &f.schedule.pipelines {
        let Some(&(_, Some(outer))) = w.parents.iter().find(|(v, _)| v == var) else {
            continue;
        };
        if !p.persistent {
            continue;
        }
        let (lo, hi) = w.loops[outer];
        for t in &p.tiles {
            if let Some(e) = live.get_mut(t) {
                *e = (e.0.min(lo), e.1.max(hi));
            }
        }
        for t in &p.prologue {
            if let Some(e) = live.get_mut(t) {
                e.0 = e.0.min(lo);
            }
        }
    }
    live
}

struct Walk<'a> {
    f: &'a PrimFunc,
    /// Position of the next statement.
    pos: usize,
    /// Every non-parallel loop: first and last position of its body.
    loops: Vec<(usize, usize)>,
    /// Every non-parallel loop's var and the loop directly around it.
    parents: Vec<(VarId, Option<usize>)>,
    /// Loops enclosing the current statement, outermost first.
    open: Vec<usize>,
    /// Shared buffer → (position of its declaration, loops around it).
    allocs: BTreeMap<BufId, (usize, Vec<usize>)>,
    /// (buffer, position, loops around the access).
    uses: Vec<(BufId, usize, Vec<usize>)>,
}

impl Walk<'_> {
    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Seq(v) => v.iter().for_each(|x| self.stmt(x)),
            Stmt::For {
                var,
                kind,
                body,
                start,
                extent,
                ..
            } if *kind != ForKind::Parallel => {
                self.leaf_exprs(&[start, extent]);
                let id = self.loops.len();
                self.loops.push((self.pos, self.pos));
                self.parents.push((*var, self.open.last().copied()));
                self.open.push(id);
                self.stmt(body);
                self.open.pop();
                self.loops[id].1 = self.pos.saturating_sub(1).max(self.loops[id].0);
            }
            Stmt::If {
                cond, then, els, ..
            } => {
                self.leaf_exprs(&[cond]);
                self.stmt(then);
                if let Some(e) = els {
                    self.stmt(e);
                }
            }
            Stmt::Alloc { buf, .. } if self.f.buf(*buf).scope == Scope::Shared => {
                self.allocs.insert(*buf, (self.pos, self.open.clone()));
                self.pos += 1;
            }
            // Everything else, `T::parallel` nests included, is one statement.
            s => {
                let a = accesses(self.f, s);
                for b in a.reads.union(&a.writes) {
                    self.uses.push((*b, self.pos, self.open.clone()));
                }
                self.pos += 1;
            }
        }
    }

    /// Loop bounds and conditions: they may read shared memory too.
    fn leaf_exprs(&mut self, es: &[&Expr]) {
        let mut bufs = BTreeSet::new();
        for e in es {
            e.visit(&mut |x| {
                if let Expr::Load(b, _, _) = x {
                    if self.f.buf(*b).scope == Scope::Shared {
                        bufs.insert(*b);
                    }
                }
            });
        }
        if bufs.is_empty() {
            return;
        }
        for b in bufs {
            self.uses.push((b, self.pos, self.open.clone()));
        }
        self.pos += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(b: u32, bytes: i64, live: (usize, usize)) -> Request {
        Request {
            align: 128,
            buf: BufId(b),
            bytes,
            live,
        }
    }

    #[test]
    fn disjoint_lifetimes_share_bytes() {
        let p = assign(&[req(0, 4096, (0, 3)), req(1, 2048, (4, 6))], 128);
        assert_eq!(p.slots[&BufId(0)], (0, 4096));
        assert_eq!(p.slots[&BufId(1)], (0, 2048));
        assert_eq!(p.bytes, 4096);
        assert!(p.overlaps(BufId(0), BufId(1)));
    }

    #[test]
    fn overlapping_lifetimes_do_not() {
        let p = assign(
            &[
                req(0, 4096, (0, 5)),
                req(1, 2048, (4, 6)),
                req(2, 1024, (5, 9)),
            ],
            128,
        );
        let ranges: Vec<(i64, i64)> = p.slots.values().copied().collect();
        for (i, &(oa, na)) in ranges.iter().enumerate() {
            for &(ob, nb) in &ranges[i + 1..] {
                assert!(oa + na <= ob || ob + nb <= oa, "{ranges:?}");
            }
        }
        assert_eq!(p.bytes, 4096 + 2048 + 1024);
        // A fourth buffer live only with buffer 2 fits in the bytes of 0.
        let p = assign(
            &[
                req(0, 4096, (0, 5)),
                req(1, 2048, (4, 6)),
                req(2, 1024, (5, 9)),
                req(3, 4096, (7, 9)),
            ],
            128,
        );
        assert_eq!(p.slots[&BufId(3)].0, 0);
        assert!(!p.overlaps(BufId(2), BufId(3)));
        assert_eq!(p.bytes, 4096 + 2048 + 1024);
    }

    #[test]
    fn offsets_are_aligned() {
        let p = assign(
            &[req(0, 100, (0, 9)), req(1, 6, (0, 9)), req(2, 300, (0, 9))],
            128,
        );
        for (off, _) in p.slots.values() {
            assert_eq!(off % 128, 0);
        }
        assert_eq!(p.slots[&BufId(2)], (0, 300));
        assert_eq!(p.slots[&BufId(0)], (384, 100));
        assert_eq!(p.slots[&BufId(1)], (512, 6));
        assert_eq!(p.bytes, 640);
    }

    #[test]
    fn loops_extend_live_ranges() {
        let src = r#"
            #[tile::kernel(n = 64, threads = 64)]
            fn k(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
                T::kernel(1, threads, |bx| {
                    let x = T::alloc_shared::<f32>([n]);
                    let y = T::alloc_shared::<f32>([n]);
                    let z = T::alloc_shared::<f32>([n]);
                    for k in T::serial(4) {
                        T::copy(a.at([k * n]), x);
                        T::copy(x, y);
                    }
                    T::copy(y, z);
                    T::copy(z, c.at([0]));
                });
            }"#;
        let f = crate::frontend::parse_kernel_source(src)
            .expect("parses")
            .func;
        let f = crate::passes::lower_tile_ops::run(f, crate::Target::Cuda).expect("lowers");
        let live = live_ranges(&f);
        let (x, y, z) = (live[&BufId(2)], live[&BufId(3)], live[&BufId(4)]);
        // x is only used in the loop but live for all of it; y lives on
        // after it; z starts after the loop, so only y overlaps it.
        assert!(x.1 < z.0, "{x:?} {z:?}");
        assert!(y.0 == x.0 && y.1 >= z.0, "{y:?} {z:?}");
    }
}
