//! Tensor maps for kernels that copy tiles with Hopper's bulk tensor copy engine.
//!
//! A kernel whose generated CUDA has a warp-specialized pipeline (tile-core's
//! `plan_pipelines`) says so in its first comment lines, which this module reads once
//! when the kernel is loaded:
//!
//! ```text
//! // tile:launch threads=256 cluster=2
//! // tile:tma map=0 param=0 box=64x128 (a)
//! ```
//!
//! The block then has `threads` threads (the spec's plus a producer warpgroup), blocks
//! `nk .. nk + n - 1` along x run as one cluster when `cluster=n` is given and n divides the
//! grid's x extent (the kernel reads its cluster's size and shares copies only then), or n
//! along x by m along y with `cluster_y=m` as well, when both divide the grid's extents; with
//! `split=n` as well, the grid's x extent is multiplied by n first (each of the spec's
//! blocks becomes a cluster of n that splits its loop: `T::use_split_k`); and the
//! kernel takes one `CUtensorMap` per `tile:tma` line, by value, after the dynamic dims:
//! map `i` describes buffer parameter `param`, a row-major tensor of 2-byte elements, as
//! a matrix (rank 2) or, when it has leading dims, as a batch of matrices (rank 3: the
//! leading dims flattened into the batch), read in boxes of `box` (columns x rows, one
//! matrix deep) with the 128-byte swizzle and zero fill past each matrix's edges.
//!
//! The kernel uses its maps only when its own run-time test passes (the tensor 16-byte
//! aligned, the row length a multiple of 8 elements, i.e. 16-byte row strides); otherwise
//! it copies with `cp.async`. A tensor the engine cannot describe therefore gets an
//! all-zero map, which that test keeps unused, rather than an error. Encoded maps are
//! cached per (address, rows, columns, box, dtype): a warm launch finds its maps among
//! the few its thread used last (no lock, no hash), else takes one hash lookup per map.
//!
//! (The comment lines stand in for fields of the kernel spec that the launcher macro does
//! not emit yet; moving them there changes nothing else here.)

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

use cudarc::driver::sys;

use crate::arg::ArgRef;
use crate::dtype::DType;
use crate::error::{Error, Result};

/// What a kernel's generated source asks of its launch beyond the spec.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct LaunchPlan {
    /// The kernel's name (for errors).
    pub kernel: &'static str,
    /// Threads per block, when not the spec's.
    pub threads: Option<u32>,
    /// Blocks per cluster along x (1: no clusters). The kernel shares tile copies between
    /// the blocks of a cluster when it finds itself launched in one, so the launcher uses
    /// clusters only when the grid's x extent is a multiple of this.
    pub cluster: u32,
    /// Blocks per cluster along y (1: clusters along x only); clusters are used only when
    /// the grid's y extent is a multiple of this too.
    pub cluster_y: u32,
    /// Blocks along x for each of the spec's grid (1: the spec's grid). A kernel whose
    /// loop is split over the blocks of a cluster (`T::use_split_k`, `split=n`) runs `n`
    /// blocks per output tile, launched as one cluster of `n`.
    pub split: u32,
    /// The tensor maps the kernel takes after its dims, in order.
    pub maps: Vec<MapSpec>,
}

/// One tensor map parameter: the buffer parameter it describes and its box.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct MapSpec {
    pub param: usize,
    pub box_cols: u32,
    pub box_rows: u32,
}

impl LaunchPlan {
    /// The plan in `source`'s leading comment lines; `None` when it has none (every
    /// kernel without bulk tensor copies).
    pub(crate) fn of_source(kernel: &'static str, source: &str) -> Option<LaunchPlan> {
        let mut plan = LaunchPlan {
            kernel,
            cluster: 1,
            cluster_y: 1,
            split: 1,
            ..LaunchPlan::default()
        };
        for line in source.lines().take_while(|l| l.starts_with("//")) {
            if let Some(rest) = line.strip_prefix("// tile:launch ") {
                plan.threads = field(rest, "threads").and_then(|v| v.parse().ok());
                plan.cluster = field(rest, "cluster")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(1);
                plan.cluster_y = field(rest, "cluster_y")
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n >= 1)
                    .unwrap_or(1);
                plan.split = field(rest, "split")
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n >= 1)
                    .unwrap_or(1);
            } else if let Some(rest) = line.strip_prefix("// tile:tma ") {
                let param = field(rest, "param").and_then(|v| v.parse().ok())?;
                let (c, r) = field(rest, "box")?.split_once('x')?;
                plan.maps.push(MapSpec {
                    param,
                    box_cols: c.parse().ok()?,
                    box_rows: r.parse().ok()?,
                });
            }
        }
        (plan.threads.is_some() || !plan.maps.is_empty()).then_some(plan)
    }
}

/// The value of `name=value` among the space-separated words of `s`.
fn field<'s>(s: &'s str, name: &str) -> Option<&'s str> {
    s.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
}

/// What `cuTensorMapEncodeTiled` is given for one map: a matrix (rank 2) or a batch of
/// matrices (rank 3) of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Geometry {
    pub addr: u64,
    /// f16, bf16, or one of the fp8 formats (moved as bytes).
    pub dtype: DType,
    /// 2 or 3.
    pub rank: u32,
    /// Columns (contiguous), rows, then matrices (1 at rank 2).
    pub dims: [u64; 3],
    /// Bytes from one row to the next, and from one matrix to the next.
    pub strides: [u64; 2],
    /// Box columns, rows, matrices (1).
    pub boxes: [u32; 3],
}

/// The L2 promotion (bytes the L2 fetches from memory on a miss; 0: the line alone) of a
/// map whose rows are `row_stride` bytes apart, decided when the map is encoded (a cache
/// miss), not per launch: the stride is in the cache's key. 256 bytes where
/// rows start on 256-byte boundaries, else 128. With 256 at a row pitch off those
/// boundaries (1000 f16 columns: 2000 bytes), 1000^3 GEMMs ran 5-10% slower than with 128
/// or none in a stand-alone driver, 2-5% over the example's variants (bench/RESULTS.md,
/// 2026-12-06 third session); at 256-byte pitches 128 was no faster. Set
/// `TILE_TMA_L2_PROMOTION=0|64|128|256` to force one for every map (read once).
fn promotion(row_stride: u64) -> u32 {
    static FORCED: OnceLock<Option<u32>> = OnceLock::new();
    let forced = FORCED.get_or_init(|| {
        std::env::var("TILE_TMA_L2_PROMOTION")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|p| matches!(p, 0 | 64 | 128 | 256))
    });
    forced.unwrap_or(if row_stride.is_multiple_of(256) {
        256
    } else {
        128
    })
}

/// The geometry of `spec` over a buffer of `dtype` and `shape` at device address `addr`,
/// or `None` when the engine cannot describe it (the kernel's own test then fails too,
/// see the module docs): a dtype other than f16/bf16/fp8, an address not 16-byte aligned,
/// a row length that is not a multiple of 16 bytes, an empty or oversized tensor, or a
/// box whose row is not one swizzle span (32, 64 or 128 bytes, see [`swizzle`]).
pub(crate) fn geometry(
    dtype: DType,
    shape: &[usize],
    addr: u64,
    spec: MapSpec,
) -> Option<Geometry> {
    let eb: u64 = match dtype {
        DType::F16 | DType::BF16 => 2,
        DType::F8E4M3 | DType::F8E5M2 => 1,
        _ => return None,
    };
    let (&cols, lead) = shape.split_last()?;
    let (&rows, batch) = lead.split_last()?;
    let mats = batch.iter().try_fold(1usize, |r, &d| r.checked_mul(d))?;
    let (cols, rows, mats) = (cols as u64, rows as u64, mats as u64);
    let row_stride = cols.checked_mul(eb)?;
    let mat_stride = row_stride.checked_mul(rows)?;
    let rank = if batch.is_empty() { 2 } else { 3 };
    let ok = addr.is_multiple_of(16)
        && row_stride.is_multiple_of(16)
        && (1..=1 << 32).contains(&cols)
        && (1..=1 << 32).contains(&rows)
        && (1..=1 << 32).contains(&mats)
        && row_stride < 1 << 40
        && (rank == 2 || mat_stride < 1 << 40)
        // A box row is one span of the swizzle it is read with.
        && matches!(u64::from(spec.box_cols) * eb, 32 | 64 | 128)
        && (1..=256).contains(&spec.box_rows);
    ok.then_some(Geometry {
        addr,
        dtype,
        rank,
        dims: [cols, rows, mats],
        strides: [row_stride, mat_stride],
        boxes: [spec.box_cols, spec.box_rows, 1],
    })
}

/// The swizzle of `g`'s boxes: the one whose span is a box row (32, 64 or 128 bytes).
/// The kernel's shared tiles are laid out the same way (`tl::wg::smem_offset`): a tile
/// of 128-byte panels, or one panel of 64- or 32-byte rows (a k tile of 32 or 16
/// two-byte columns).
fn swizzle(g: &Geometry) -> sys::CUtensorMapSwizzle {
    match g.boxes[0] as usize * g.dtype.size() {
        32 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
        64 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
        _ => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
    }
}

/// Encodes `g` (`cuTensorMapEncodeTiled`).
fn encode(g: &Geometry) -> Result<sys::CUtensorMap> {
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let data = match g.dtype {
        DType::F16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::BF16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        // The engine has no fp8 type; it moves the bytes.
        _ => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
    };
    let elem = [1u32; 3];
    // SAFETY: every pointer points at a live local of the sizes the rank (at most 3) implies;
    // `geometry` checked the limits the driver documents, and the driver only reads the
    // address (it is not dereferenced on the host).
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            data,
            g.rank,
            g.addr as *mut c_void,
            g.dims.as_ptr(),
            g.strides.as_ptr(),
            g.boxes.as_ptr(),
            elem.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle(g),
            match promotion(g.strides[0]) {
                0 => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_NONE,
                64 => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
                128 => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                _ => sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            },
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    match r {
        sys::CUresult::CUDA_SUCCESS => Ok(map),
        e => Err(Error::driver(
            "cuTensorMapEncodeTiled",
            cudarc::driver::DriverError(e),
        )),
    }
}

/// Encoded maps by geometry. Bounded: cleared when full (a process that keeps launching
/// on fresh allocations re-encodes, it does not grow).
const CACHE_ENTRIES: usize = 4096;

fn cache() -> &'static Mutex<HashMap<Geometry, sys::CUtensorMap>> {
    static CACHE: OnceLock<Mutex<HashMap<Geometry, sys::CUtensorMap>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The map of `spec` for this launch's arguments, from the cache or encoded now.
pub(crate) fn map_for(
    kernel: &'static str,
    args: &[ArgRef<'_>],
    spec: MapSpec,
) -> Result<sys::CUtensorMap> {
    let Some(a) = args.get(spec.param) else {
        return Err(Error::Spec {
            kernel,
            message: format!(
                "its code asks for a tensor map of parameter {} of {} buffers",
                spec.param,
                args.len()
            ),
        });
    };
    let Some(g) = geometry(a.dtype, a.shape, a.ptr as u64, spec) else {
        return Ok(sys::CUtensorMap { opaque: [0; 16] });
    };
    if let Some(m) = RECENT.with(|r| r.borrow().find(&g)) {
        return Ok(m);
    }
    let m = {
        let mut c = cache().lock().unwrap_or_else(|p| p.into_inner());
        match c.get(&g) {
            Some(m) => *m,
            None => {
                let m = encode(&g)?;
                if c.len() >= CACHE_ENTRIES {
                    c.clear();
                }
                c.insert(g, m);
                m
            }
        }
    };
    RECENT.with(|r| r.borrow_mut().put(g, m));
    Ok(m)
}

/// The maps this thread used last: a launch loop finds its maps here without the
/// shared cache's lock and hashing (the launch-cost bar counts every 100 ns).
const RECENT_ENTRIES: usize = 8;

struct Recent {
    slots: [Option<(Geometry, sys::CUtensorMap)>; RECENT_ENTRIES],
    /// The slot the next new map replaces (round robin).
    next: usize,
}

impl Recent {
    fn find(&self, g: &Geometry) -> Option<sys::CUtensorMap> {
        self.slots
            .iter()
            .flatten()
            .find(|(k, _)| k == g)
            .map(|(_, m)| *m)
    }

    fn put(&mut self, g: Geometry, m: sys::CUtensorMap) {
        self.slots[self.next] = Some((g, m));
        self.next = (self.next + 1) % RECENT_ENTRIES;
    }
}

thread_local! {
    static RECENT: RefCell<Recent> = const {
        RefCell::new(Recent { slots: [None; RECENT_ENTRIES], next: 0 })
    };
}

/// Calls `f` with `params` followed by pointers to the kernel's tensor maps (none
/// without a plan). The maps are locals of this call, alive until `f` returns; the
/// driver copies parameters when the launch is queued. Up to [`INLINE_MAPS`] maps and
/// [`INLINE_PARAMS`] other parameters stay on the stack.
#[inline(always)]
pub(crate) fn with_maps<R>(
    plan: Option<&LaunchPlan>,
    args: &[ArgRef<'_>],
    params: &mut [*mut c_void],
    f: impl FnOnce(&mut [*mut c_void]) -> Result<R>,
) -> Result<R> {
    let Some(plan) = plan.filter(|p| !p.maps.is_empty()) else {
        return f(params);
    };
    let (n, m) = (params.len(), plan.maps.len());
    if n <= INLINE_PARAMS && m <= INLINE_MAPS {
        // A launch loop repeats its arguments: the maps of this plan's last launch on
        // this thread are reused when every mapped tensor is the same (address, dtype,
        // shape), with one comparison instead of a geometry and a lookup per map.
        let key = LastKey::of(plan, args);
        let last = key.as_ref().and_then(|k| {
            LAST.with(|l| {
                l.borrow()
                    .as_ref()
                    .filter(|(lk, _)| lk == k)
                    .map(|(_, m)| *m)
            })
        });
        let mut maps = match last {
            Some(maps) => maps,
            None => {
                let mut maps = [sys::CUtensorMap { opaque: [0; 16] }; INLINE_MAPS];
                for (slot, &s) in maps.iter_mut().zip(&plan.maps) {
                    *slot = map_for(plan.kernel, args, s)?;
                }
                if let Some(k) = key {
                    LAST.with(|l| *l.borrow_mut() = Some((k, maps)));
                }
                maps
            }
        };
        let mut all = [std::ptr::null_mut(); INLINE_PARAMS + INLINE_MAPS];
        all[..n].copy_from_slice(params);
        for (slot, map) in all[n..n + m].iter_mut().zip(maps.iter_mut()) {
            *slot = (map as *mut sys::CUtensorMap).cast::<c_void>();
        }
        return f(&mut all[..n + m]);
    }
    let mut maps = plan
        .maps
        .iter()
        .map(|&s| map_for(plan.kernel, args, s))
        .collect::<Result<Vec<_>>>()?;
    let mut all: Vec<*mut c_void> = params.to_vec();
    all.extend(
        maps.iter_mut()
            .map(|m| (m as *mut sys::CUtensorMap).cast::<c_void>()),
    );
    f(&mut all)
}

/// Everything a launch's maps depend on: per map, its box and the tensor's address,
/// dtype and shape (at most [`KEY_DIMS`] dims, else no key).
#[derive(Clone, Copy, PartialEq, Eq)]
struct LastKey {
    boxes: [(u32, u32); INLINE_MAPS],
    tensors: [(usize, DType, [usize; KEY_DIMS], usize); INLINE_MAPS],
}

const KEY_DIMS: usize = 4;

impl LastKey {
    fn of(plan: &LaunchPlan, args: &[ArgRef<'_>]) -> Option<LastKey> {
        let mut tensors = [(0, DType::F32, [0; KEY_DIMS], 0); INLINE_MAPS];
        let mut boxes = [(0, 0); INLINE_MAPS];
        for ((slot, b), s) in tensors.iter_mut().zip(&mut boxes).zip(&plan.maps) {
            *b = (s.box_cols, s.box_rows);
            let a = args.get(s.param)?;
            if a.shape.len() > KEY_DIMS {
                return None;
            }
            let mut shape = [0; KEY_DIMS];
            shape[..a.shape.len()].copy_from_slice(a.shape);
            *slot = (a.ptr, a.dtype, shape, a.shape.len());
        }
        Some(LastKey { boxes, tensors })
    }
}

thread_local! {
    /// The last launch's key and maps on this thread.
    static LAST: RefCell<Option<(LastKey, [sys::CUtensorMap; INLINE_MAPS])>> = const { RefCell::new(None) };
}

/// Tensor maps of a launch kept on the stack.
const INLINE_MAPS: usize = 4;
/// Buffer and dim parameters of a launch with tensor maps kept on the stack.
const INLINE_PARAMS: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;

    const GEMM: &str =
        "// Generated by tile 0.1.0 from kernel `gemm_nn_f16` (target: cuda). Do not edit.\n\
        // tile:launch threads=256\n\
        // tile:tma map=0 param=0 box=64x128 (a)\n\
        // tile:tma map=1 param=1 box=64x64 (b)\n\
        #include <cuda_fp16.h>\n\
        // tile:tma map=2 param=2 box=64x64 (not a header line)\n";

    #[test]
    fn the_plan_is_read_from_the_leading_comment_lines() {
        let p = LaunchPlan::of_source("gemm", GEMM).expect("a plan");
        assert_eq!(p.threads, Some(256));
        assert_eq!(p.cluster, 1);
        let paired = GEMM.replace("threads=256\n", "threads=256 cluster=2\n");
        let q = LaunchPlan::of_source("gemm", &paired).expect("a plan");
        assert_eq!((q.threads, q.cluster), (Some(256), 2));
        let grid = GEMM.replace("threads=256\n", "threads=256 cluster=4 cluster_y=2\n");
        let q = LaunchPlan::of_source("gemm", &grid).unwrap();
        assert_eq!((q.cluster, q.cluster_y, q.split), (4, 2, 1));
        let eights = GEMM.replace("threads=256\n", "threads=256 cluster=8\n");
        let q = LaunchPlan::of_source("gemm", &eights).expect("a plan");
        assert_eq!((q.threads, q.cluster, q.split), (Some(256), 8, 1));
        let split = GEMM.replace("threads=256\n", "threads=256 cluster=2 split=2\n");
        let q = LaunchPlan::of_source("gemm", &split).expect("a plan");
        assert_eq!((q.threads, q.cluster, q.split), (Some(256), 2, 2));
        assert_eq!(
            p.maps,
            vec![
                MapSpec {
                    param: 0,
                    box_cols: 64,
                    box_rows: 128
                },
                MapSpec {
                    param: 1,
                    box_cols: 64,
                    box_rows: 64
                },
            ]
        );
        assert_eq!(
            LaunchPlan::of_source("k", "// Generated by tile\n#include <x>\n"),
            None
        );
    }

    #[test]
    fn maps_follow_the_parameters_and_unusable_tensors_get_zero_maps() {
        // f32 tensors: no map the engine could use, so no driver call either.
        let t = crate::tensor::Tensor::<f32>::zeros(&[64, 64], crate::device::Device::Cpu)
            .expect("a tensor");
        let args = [ArgRef::input(&t)];
        let plan = LaunchPlan {
            kernel: "k",
            threads: Some(256),
            cluster: 1,
            cluster_y: 1,
            split: 1,
            maps: vec![
                MapSpec {
                    param: 0,
                    box_cols: 64,
                    box_rows: 64
                };
                2
            ],
        };
        let (mut x, mut y) = (1u64, 2i32);
        let mut params = [
            (&mut x as *mut u64).cast::<c_void>(),
            (&mut y as *mut i32).cast::<c_void>(),
        ];
        let first = params[0];
        let n = with_maps(Some(&plan), &args, &mut params, |p| {
            assert_eq!(p[0], first);
            for &m in &p[2..] {
                // SAFETY: the pointers point at the call's live maps.
                let map = unsafe { &*(m as *const sys::CUtensorMap) };
                assert_eq!(map.opaque, [0; 16]);
            }
            Ok(p.len())
        })
        .expect("launch parameters");
        assert_eq!(n, 4);
        // A map of a parameter the kernel does not have is the spec's error.
        let bad = LaunchPlan {
            maps: vec![MapSpec {
                param: 3,
                box_cols: 64,
                box_rows: 64,
            }],
            ..plan
        };
        assert!(with_maps(Some(&bad), &args, &mut params, |p| Ok(p.len())).is_err());
        assert_eq!(
            with_maps(None, &args, &mut params, |p| Ok(p.len())).expect("plain"),
            2
        );
    }

    #[test]
    fn geometry_follows_the_engine_limits() {
        let s = MapSpec {
            param: 0,
            box_cols: 64,
            box_rows: 128,
        };
        let g = geometry(DType::F16, &[4096, 4104], 1 << 20, s).expect("legal");
        assert_eq!((g.rank, g.dims), (2, [4104, 4096, 1]));
        assert_eq!(g.strides[0], 8208);
        assert_eq!(g.boxes, [64, 128, 1]);
        if std::env::var_os("TILE_TMA_L2_PROMOTION").is_none() {
            // 256-byte promotion only where rows start on 256-byte boundaries.
            assert_eq!(promotion(g.strides[0]), 128);
            let aligned = geometry(DType::F16, &[4096, 4096], 1 << 20, s).expect("legal");
            assert_eq!(promotion(aligned.strides[0]), 256);
        }
        // Leading dims flatten into a batch of matrices, each zero-filled at its own edge.
        let b = geometry(DType::BF16, &[3, 5, 7, 64], 0, s).expect("legal");
        assert_eq!((b.rank, b.dims, b.strides), (3, [64, 7, 15], [128, 896]));
        // Row length not a multiple of 8 elements (row stride not a multiple of 16 bytes).
        assert_eq!(geometry(DType::F16, &[4096, 4099], 0, s), None);
        // Misaligned address, other dtypes, empty tensors, boxes the swizzle refuses.
        assert_eq!(geometry(DType::F16, &[64, 64], 8, s), None);
        assert_eq!(geometry(DType::F32, &[64, 64], 0, s), None);
        assert_eq!(geometry(DType::F16, &[0, 64], 0, s), None);
        assert_eq!(
            geometry(DType::F16, &[64, 64], 0, MapSpec { box_cols: 128, ..s }),
            None
        );
        assert_eq!(
            geometry(DType::F16, &[64, 64], 0, MapSpec { box_cols: 24, ..s }),
            None
        );
        // Rows of 64 and 32 bytes take the 64- and 32-byte swizzles (k tiles of 32
        // and 16 two-byte columns; 32 fp8 columns are 32 bytes).
        use sys::CUtensorMapSwizzle::{
            CU_TENSOR_MAP_SWIZZLE_128B as S128, CU_TENSOR_MAP_SWIZZLE_32B as S32,
            CU_TENSOR_MAP_SWIZZLE_64B as S64,
        };
        for (dtype, box_cols, want) in [
            (DType::F16, 64, S128),
            (DType::F16, 32, S64),
            (DType::BF16, 16, S32),
            (DType::F8E4M3, 128, S128),
            (DType::F8E4M3, 32, S32),
        ] {
            let g = geometry(dtype, &[64, 64], 0, MapSpec { box_cols, ..s }).expect("legal");
            assert_eq!(swizzle(&g), want, "{dtype:?} box of {box_cols} columns");
        }
        assert_eq!(
            geometry(DType::F16, &[64, 64], 0, MapSpec { box_rows: 512, ..s }),
            None
        );
    }
}
