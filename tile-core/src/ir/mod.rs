//! The tile IR: one `PrimFunc` per kernel.
//!
//! Invariants (checked by `verify`):
//! - Variables and buffers live in per-function tables and are referred to by
//!   handle (`VarId`, `BufId`); a handle is valid only for its function.
//! - Buffer parameters are `Scope::Global`; every other buffer is declared by an
//!   `Stmt::Alloc` before use, and shared/fragment/local shapes are constants.
//! - Dynamic dims are `int32` variables bound at launch (`PrimFunc::dims`).
//! - Every expression has a dtype (`Expr::dtype`); stores convert explicitly.
//! - Tile ops (`Copy`, `Fill`, `Gemm`) exist only before `lower_tile_ops`;
//!   codegen sees loops, loads and stores.
//!
//! The printer (`print.rs`) turns a function into deterministic script text;
//! the cache key is derived from that text, so debug-only information (spans,
//! comments in the user's source) never reaches it.

mod expr;
pub mod fold;
mod func;
mod names;
pub mod print;
pub mod read;
mod schedule;
mod stmt;
mod walk;

pub use expr::*;
pub use func::*;
pub use names::NameIndex;
pub use schedule::{NestPlan, Pipeline, Rotation, Schedule, SharedPool, Split};
pub use stmt::*;

use std::fmt;

/// Element and scalar types (the table is the kernel ABI's, shared with the runtime).
pub use tile_abi::DType;

/// Where a buffer lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Device memory; kernel parameters.
    Global,
    /// Per block, visible to all its threads.
    Shared,
    /// Per block logically, distributed over the threads' registers.
    Fragment,
    /// Per thread.
    Local,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Shared => "shared",
            Scope::Fragment => "local.fragment",
            Scope::Local => "local",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufId(pub u32);

/// A scalar variable: loop index, block index, dynamic dim, let binding or
/// mutable local.
#[derive(Debug, Clone, PartialEq)]
pub struct Var {
    pub name: String,
    pub dtype: DType,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Buffer {
    pub name: String,
    pub dtype: DType,
    /// Row-major shape; constants for on-chip buffers.
    pub shape: Vec<Expr>,
    pub scope: Scope,
    /// Written by the kernel (only meaningful for parameters).
    pub mutable: bool,
    /// How elements map to memory or to threads, when not the default
    /// (row-major memory; fragments split over threads in chunks). Set by
    /// passes for the target, or by `T::annotate_layout`.
    pub layout: Option<Layout>,
}

/// Target layouts chosen by passes (CUDA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// A shared tile of 2-byte elements stored in the swizzled order the
    /// tensor-core GEMM reads without bank conflicts (`tl::smem_offset`).
    Swizzled,
    /// A GEMM accumulator fragment: thread `t` holds the elements that
    /// `tl::acc_coord` gives, the warps tiling it `wm` x `wn`.
    Mma { wm: i64, wn: i64 },
    /// A shared tile as Hopper's `wgmma` reads it (`tl::wg::smem_offset`):
    /// panels of 64 columns (128 bytes), 16-byte chunks XOR-swizzled by the
    /// row within each 8-row group (the descriptors' 128-byte swizzle); a tile
    /// of 32 or 16 columns takes the 64- or 32-byte swizzle of the same
    /// family (chosen from the contiguous extent).
    WgmmaOperand,
    /// A `wgmma` accumulator fragment: thread `t` holds the elements that
    /// `tl::wg::acc_coord` gives, `wgs` warpgroups splitting its rows.
    Wgmma { wgs: i64 },
    /// A 1-D fragment of an `Mma { wm, wn }` accumulator's row count, tied to
    /// it: each thread holds the rows its accumulator registers cover
    /// (`tl::mma_row`), so a row reduction of the accumulator and a per-row
    /// value read beside it stay in registers. The threads of a row (the four
    /// of a quad, in each of the `wn` warps sharing it) hold equal copies.
    MmaRows { wm: i64, wn: i64 },
    /// The same, tied to a `Wgmma { wgs }` accumulator (`tl::wg_row`).
    WgmmaRows { wgs: i64 },
}

impl Layout {
    /// Whether a fragment with this layout is a tensor-core accumulator.
    pub fn is_accumulator(self) -> bool {
        matches!(self, Layout::Mma { .. } | Layout::Wgmma { .. })
    }
    /// Whether a fragment with this layout follows an accumulator's rows.
    pub fn is_rows(self) -> bool {
        matches!(self, Layout::MmaRows { .. } | Layout::WgmmaRows { .. })
    }
    /// The row layout tied to an accumulator layout.
    pub fn rows_of(self) -> Option<Layout> {
        match self {
            Layout::Mma { wm, wn } => Some(Layout::MmaRows { wm, wn }),
            Layout::Wgmma { wgs } => Some(Layout::WgmmaRows { wgs }),
            _ => None,
        }
    }
    /// Registers per thread of a fragment of `elems` elements (`rows` for a
    /// row layout) in this layout, `threads` in the block.
    pub fn registers(self, elems: i64, threads: i64) -> i64 {
        match self {
            // Two rows (r and r + 8) per 16-row strip of the warp's tile.
            Layout::MmaRows { wm, .. } => elems / (8 * wm),
            // Two rows per 64-row strip of the warpgroup's tile.
            Layout::WgmmaRows { wgs } => elems / (32 * wgs),
            _ => elems / threads,
        }
    }
    /// Whether a shared tile with this layout is swizzled in 16-byte chunks
    /// (8 contiguous 2-byte elements stay together).
    pub fn is_swizzle(self) -> bool {
        matches!(self, Layout::Swizzled | Layout::WgmmaOperand)
    }
}

impl Buffer {
    /// Shape as constants, if every dim is one.
    pub fn const_shape(&self) -> Option<Vec<i64>> {
        self.shape.iter().map(Expr::as_int).collect()
    }
    /// Elements of an on-chip buffer (whose shape is constant; 1 otherwise).
    pub fn const_elems(&self) -> i64 {
        self.const_shape().unwrap_or_default().iter().product()
    }
    /// Bytes of an on-chip buffer (`const_elems` times the element size).
    pub fn const_bytes(&self) -> i64 {
        self.const_elems() * self.dtype.bytes()
    }
}
