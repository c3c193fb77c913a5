//! Tile copies global → shared as `tl::copy_tile`, or as bulk tensor copies
//! (`tl::tma::load_tile`) in a warp-specialized pipeline.

use super::*;

impl Writer<'_> {
    /// One producer tile copy (see [`TileCopy`]) as `tl::copy_tile` in `mode`
    /// (`tl::COPY_*`); `live`: a condition under which the tile has rows at
    /// all (otherwise it is zero-filled).
    pub(super) fn copy_tile(
        &mut self,
        c: &TileCopy,
        mode: &str,
        live: Option<&str>,
    ) -> Result<(), Diagnostic> {
        let f = self.f;
        let d = f.buf(c.dst);
        let shape = d.const_shape().unwrap_or_default();
        // The tile's layout decides which library writes it.
        let lib = match d.layout {
            Some(Layout::WgmmaOperand) => "tl::wg",
            _ => "tl",
        };
        let args = self.copy_args(c, live)?;
        self.line(&format!(
            "{lib}::copy_tile<{}, {}, {}, {}, {mode}>({args});",
            ty(d.dtype)?,
            shape[0],
            shape[1],
            f.launch.threads,
        ));
        Ok(())
    }

    /// Two producer tile copies that both move element by element
    /// (`tl::COPY_SCALAR`) into `wgmma` operand tiles of one dtype, as one
    /// `tl::wg::copy_tile_pair`: the loads of both in flight at once (one
    /// memory latency instead of two or more, where a thread's chunks allow).
    /// `None` when the pair does not qualify (then each copies alone).
    pub(super) fn copy_tile_pair(
        &mut self,
        a: &TileCopy,
        b: &TileCopy,
        live: Option<&str>,
    ) -> Result<Option<()>, Diagnostic> {
        let f = self.f;
        let (da, db) = (f.buf(a.dst), f.buf(b.dst));
        if da.layout != Some(Layout::WgmmaOperand)
            || db.layout != Some(Layout::WgmmaOperand)
            || da.dtype != db.dtype
        {
            return Ok(None);
        }
        let (sa, sb) = (
            da.const_shape().unwrap_or_default(),
            db.const_shape().unwrap_or_default(),
        );
        let (x, y) = (self.copy_args(a, live)?, self.copy_args(b, live)?);
        self.line(&format!(
            "tl::wg::copy_tile_pair<{}, {}, {}, {}, {}, {}>({x}, {y});",
            ty(da.dtype)?,
            sa[0],
            sa[1],
            sb[0],
            sb[1],
            f.launch.threads,
        ));
        Ok(Some(()))
    }

    /// The arguments of `copy_tile` for one copy: the stage's tile, the
    /// tile's first element in the tensor, the row pitch, and the rows and
    /// columns left from the tile's origin (no rows unless `live` holds).
    fn copy_args(&self, c: &TileCopy, live: Option<&str>) -> Result<String, Diagnostic> {
        let f = self.f;
        let g = f.buf(c.src);
        let (r0, c0) = (self.expr(&c.r0)?, self.expr(&c.c0)?);
        let nd = g.shape.len();
        let (rows, cols) = (self.expr(&g.shape[nd - 2])?, self.expr(&g.shape[nd - 1])?);
        let rows_left = match live {
            Some(l) => format!("({l}) ? {rows} - ({r0}) : 0"),
            None => format!("{rows} - ({r0})"),
        };
        // The tile's first row in the tensor seen as [(leading dims) * rows, cols]:
        // leading indices flattened row-major, then scaled by the rows per matrix.
        let mut row = String::new();
        for (d, e) in c.lead.iter().enumerate() {
            let e = self.expr(e)?;
            row = if d == 0 {
                format!("(long long)({e})")
            } else {
                format!("({row}) * {} + ({e})", self.expr(&g.shape[d])?)
            };
        }
        let row = if row.is_empty() {
            format!("(long long)({r0})")
        } else {
            format!("(({row}) * {rows} + ({r0}))")
        };
        Ok(format!(
            "{}, {} + {row} * {cols} + ({c0}), {cols}, {rows_left}, {cols} - ({c0})",
            self.tile_base(c.dst),
            self.name(c.src),
        ))
    }

    /// One producer tile copy as bulk tensor copies into `dst` (a stage's
    /// pointer), completing on the mbarrier `bar`: one box of 64 columns by
    /// all the tile's rows per 128-byte panel, through the kernel's tensor map
    /// of the source tensor with that box (`WsPlan::maps`).
    pub(super) fn tma_load(
        &mut self,
        c: &TileCopy,
        dst: &str,
        bar: &str,
    ) -> Result<(), Diagnostic> {
        let f = self.f;
        let shape = f.buf(c.dst).const_shape().unwrap_or_default();
        let map = self
            .ws
            .as_ref()
            .and_then(|p| {
                let key = super::ws::MapKey::of(f, c.src, c.dst, shape[0]);
                p.maps.iter().position(|&m| m == key)
            })
            .ok_or_else(|| err("internal error: a bulk tensor copy without its tensor map"))?;
        let (r0, c0) = (self.expr(&c.r0)?, self.expr(&c.c0)?);
        // A tensor with leading dims is a batch of matrices to the engine (a
        // rank-3 map, the runtime's `tma` module): the leading indices
        // flatten into the matrix index.
        let mut z: Option<String> = None;
        let dims = &f.buf(c.src).shape;
        for (i, e) in c.lead.iter().enumerate() {
            let x = self.expr(e)?;
            z = Some(match z {
                None => x,
                Some(z) => format!("({z}) * ({}) + ({x})", self.expr(&dims[i])?),
            });
        }
        let z = z.map(|z| format!(", {z}")).unwrap_or_default();
        // 1-byte elements (fp8): panels of 128 columns.
        let eb = match f.buf(c.dst).dtype.bytes() {
            1 => ", 1",
            _ => "",
        };
        self.line(&format!(
            "tl::tma::load_tile<{}, {}{eb}>({dst}, &tl_tmap{map}, {bar}, {r0}, {c0}{z});",
            shape[0], shape[1]
        ));
        Ok(())
    }

    /// This block's part of a tile that the blocks of group `g` of a cluster
    /// load (`WsPlan::multicast`): rows `part * R/n ..` of each panel through
    /// the tensor map of `R/n`-row boxes, multicast to the group's `n`.
    pub(super) fn tma_load_part(
        &mut self,
        c: &TileCopy,
        dst: &str,
        bar: &str,
        g: super::cluster::Group,
        k: usize,
    ) -> Result<(), Diagnostic> {
        let f = self.f;
        let n = g.parts(f);
        let shape = f.buf(c.dst).const_shape().unwrap_or_default();
        let map = self
            .ws
            .as_ref()
            .and_then(|p| {
                let key = super::ws::MapKey::of(f, c.src, c.dst, shape[0] / n);
                p.maps.iter().position(|&m| m == key)
            })
            .filter(|_| c.lead.is_empty())
            .ok_or_else(|| err("internal error: a multicast copy without its tensor map"))?;
        let (r0, c0) = (self.expr(&c.r0)?, self.expr(&c.c0)?);
        // As in `tma_load`: 1-byte elements have panels of 128 columns.
        let eb = if f.buf(c.dst).dtype.bytes() == 1 {
            1
        } else {
            2
        };
        self.line(&format!(
            "tl::tma::load_tile_part<{}, {}, {eb}, {n}>({dst}, &tl_tmap{map}, {bar}, {r0}, {c0}, {}, {});",
            shape[0],
            shape[1],
            g.part(f, k),
            g.mask(f, k)
        ));
        Ok(())
    }

    /// The run-time conditions under which every tile of the copy `c` moves as
    /// whole 16-byte chunks (`lower_tile_ops` chose the dims to test); `None`:
    /// never.
    pub(super) fn vec_cond(&self, c: &TileCopy) -> Option<Vec<String>> {
        self.align_cond(c, 16)
    }

    /// The run-time conditions under which every row of the copy `c`'s tiles
    /// starts on a 4-byte boundary, so its chunks can move as 4-byte
    /// `cp.async` words (`tl::COPY_WORDS`): the dims `vec_cond` tests even
    /// for 2-byte elements (multiples of 4 for 1-byte ones); `None`: never.
    pub(super) fn words_cond(&self, c: &TileCopy) -> Option<Vec<String>> {
        (self.f.buf(c.src).dtype.bytes() <= 2).then(|| self.align_cond(c, 4))?
    }

    /// The tensor `bytes`-aligned and each dim `lower_tile_ops` chose for the
    /// copy a multiple of `bytes` worth of elements.
    fn align_cond(&self, c: &TileCopy, bytes: i64) -> Option<Vec<String>> {
        let elems = bytes / self.f.buf(c.src).dtype.bytes().max(1);
        let mut cond = vec![format!("tl::aligned{bytes}({})", self.name(c.src))];
        cond.extend(
            c.vector_if
                .as_ref()?
                .iter()
                .map(|d| format!("{} % {elems} == 0", ident(&self.f.var(*d).name))),
        );
        Some(cond)
    }

    pub(super) fn note_align(&mut self, b: BufId, v: i64) {
        if let Some(p) = self.f.params.iter().position(|&x| x == b) {
            let bytes = (self.f.buf(b).dtype.bytes() * v) as u32;
            self.param_align[p] = self.param_align[p].max(bytes);
        }
    }
}
