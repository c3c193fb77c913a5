//! GEMM at any row pitch. On Hopper the example GEMM (`examples/gemm.rs`)
//! moves its tiles with bulk tensor copies, which need every row of A and B
//! to start on a 16-byte boundary: K and N multiples of 8 for 2-byte
//! elements. At other pitches it copies element by element, and so slows
//! down about fivefold, as cuBLAS does (both near 150 TFLOP/s at
//! 4097×4095×4099 on the H200, against 730–770 at 4096³; bench/RESULTS.md).
//!
//! [`AnyPitch`] copies the operands whose pitch is off into zero-padded
//! buffers first (one read and one write of each, memory-bound), runs the
//! aligned GEMM on them, and copies C back from a padded buffer when N is
//! off. The padding is exact: A's zero columns meet B's zero rows, and the
//! padded columns of C are dropped. Weights that stay fixed across calls go
//! through [`FixedB`], which pads B once.
//!
//! Whether padding pays depends on the shape: at 4097×4095×4099 the copies
//! cost a sixth of the product and save two thirds of it; at 1000×1030×1050
//! they cost more than the aligned product (bench/RESULTS.md). [`Gemm`]
//! therefore chooses per shape, as the autotuner chooses a kernel's variant:
//! its two plans (the direct GEMM, and the padded one) form a
//! `tile::autotune::PlanSet`, timed on the call's shapes when tuning is asked
//! for and remembered in memory and on disk.
//!
//! `cargo run --release --example gemm_any_pitch [M N K]` checks the result
//! against a host reference at a few odd shapes (or at M N K); `bench gemm
//! 4097x4095x4099` times it beside cuBLAS and the direct GEMM.

// Other examples that need both load this file and use its `gemm`.
#[allow(dead_code)]
#[path = "gemm.rs"]
pub mod gemm;

use tile::autotune::{pick_plan, ArgRef, Pick, PlanSet};
use tile::prelude::*;

/// `y` = `x` where both have the element and 0 elsewhere in `y`: a guarded
/// read outside `x` gives 0 (README, "Out-of-bounds reads"), and stores
/// outside `y` are skipped. Into a larger `y` it pads `x` with zeros; into
/// a smaller one it keeps `x`'s top-left corner.
#[tile::kernel(dtype = [f16, bf16], block_r = 16, block_c = 256, threads = 256)]
pub fn resize(x: Tensor<dtype, (R, C)>, y: TensorMut<dtype, (RY, CY)>) {
    T::kernel(
        [T::ceildiv(CY, block_c), T::ceildiv(RY, block_r)],
        threads,
        |bx, by| {
            for (i, j) in T::parallel([block_r, block_c]) {
                y[(by * block_r + i, bx * block_c + j)] = x[(by * block_r + i, bx * block_c + j)];
            }
        },
    );
}

/// A GEMM launcher `c = a · b` that may capture (a tuned or chosen variant).
pub type GemmFn<'a, E> =
    &'a dyn Fn(&Tensor<E>, &Tensor<E>, &mut Tensor<E>) -> Result<(), tile::Error>;

/// The element types [`AnyPitch`] runs: those of its two kernels.
pub trait Dtype: gemm::gemm_nn::Dtype + resize::Dtype {}
impl<E: gemm::gemm_nn::Dtype + resize::Dtype> Dtype for E {}

/// `x` rounded up to a multiple of 8 (16 bytes of 2-byte elements).
fn up8(x: usize) -> usize {
    x.div_ceil(8) * 8
}

/// `(K, N)` when `a · b` into `c` fits together and K or N is off a
/// multiple of 8 (what padding is for); `None` when the GEMM runs as it is
/// (or refuses the shapes, naming the buffer).
fn padded_dims<E: Element>(a: &Tensor<E>, b: &Tensor<E>, c: &Tensor<E>) -> Option<(usize, usize)> {
    let (&[m, k], &[kb, n], &[mc, nc]) = (a.shape(), b.shape(), c.shape()) else {
        return None;
    };
    ((kb, mc, nc) == (k, m, n) && (up8(k), up8(n)) != (k, n)).then_some((k, n))
}

/// `c = a · b` at any K and N, through padded copies where the pitch needs
/// them. Holds the padded buffers between calls (allocated for the first
/// call's shapes, again when they change). [`FixedB`] pads a B that stays
/// fixed across calls once.
pub struct AnyPitch<E: Dtype> {
    a: Option<Tensor<E>>,
    b: Option<Tensor<E>>,
    c: Option<Tensor<E>>,
}

impl<E: Dtype> Default for AnyPitch<E> {
    fn default() -> Self {
        Self {
            a: None,
            b: None,
            c: None,
        }
    }
}

/// `slot` holding a zeroed tensor of `shape` on `dev` (kept if it has it).
fn buffer<'s, E: Element>(
    slot: &'s mut Option<Tensor<E>>,
    shape: &[usize],
    dev: Device,
) -> Result<&'s mut Tensor<E>, tile::Error> {
    if slot.as_ref().is_none_or(|t| t.shape() != shape) {
        *slot = Some(Tensor::zeros(shape, dev)?);
    }
    Ok(slot.as_mut().expect("just set"))
}

impl<E: Dtype> AnyPitch<E> {
    /// `c = a · b` (`a`: M × K, `b`: K × N, `c`: M × N), the aligned product
    /// run by `gemm` (a `gemm_nn` launcher: default, tuned or one variant).
    /// Shapes that do not fit together go to `gemm` as they are, whose error
    /// names the buffer.
    pub fn launch(
        &mut self,
        a: &Tensor<E>,
        b: &Tensor<E>,
        c: &mut Tensor<E>,
        gemm: GemmFn<'_, E>,
    ) -> Result<(), tile::Error> {
        let Some((k, n)) = padded_dims(a, b, c) else {
            return gemm(a, b, c);
        };
        let bp = buffer(&mut self.b, &[up8(k), up8(n)], a.device())?;
        resize(b, bp)?;
        multiply((&mut self.a, &mut self.c), a, bp, (k, n), c, gemm)
    }
}

/// The product with B already padded to `up8(k) × up8(n)` (`bp`, or B
/// itself when aligned): pads A when K is off, multiplies, and unpads C
/// when N is off, through the buffers in `slots`.
fn multiply<E: Dtype>(
    (a_slot, c_slot): (&mut Option<Tensor<E>>, &mut Option<Tensor<E>>),
    a: &Tensor<E>,
    bp: &Tensor<E>,
    (k, n): (usize, usize),
    c: &mut Tensor<E>,
    gemm: GemmFn<'_, E>,
) -> Result<(), tile::Error> {
    let (m, kp, np) = (a.shape()[0], up8(k), up8(n));
    let dev = a.device();
    let ap = if kp != k {
        let ap = buffer(a_slot, &[m, kp], dev)?;
        resize(a, ap)?;
        &*ap
    } else {
        a
    };
    if np == n {
        return gemm(ap, bp, c);
    }
    let cp = buffer(c_slot, &[m, np], dev)?;
    gemm(ap, bp, cp)?;
    resize(cp, c)
}

/// [`Gemm`]'s plans, in order: the GEMM on the operands as they are, and the
/// GEMM on padded copies ([`AnyPitch`]). Each launches `gemm_nn` with the
/// policy of the call, so tuning a plan tunes the GEMM it runs.
const PLANS: &[&str] = &["direct", "padded"];

/// The plans' set per element type; their choices go stale with `gemm_nn`'s
/// variants.
static PLANS_F16: PlanSet = PlanSet::new("gemm_any_pitch[f16]", PLANS, || {
    vec![gemm::gemm_nn::variants::<f16>()]
});
static PLANS_BF16: PlanSet = PlanSet::new("gemm_any_pitch[bf16]", PLANS, || {
    vec![gemm::gemm_nn::variants::<bf16>()]
});

/// The plan set of `E` (the two element types `gemm_nn` has).
fn plans<E: Dtype>() -> &'static PlanSet {
    match E::DTYPE {
        DType::BF16 => &PLANS_BF16,
        _ => &PLANS_F16,
    }
}

/// `c = a · b` at any K and N, directly or through padded copies, whichever
/// the policy picks for the shapes (see the module's notes): `Pick::Auto`
/// runs the choice made for these shapes in this process (else direct, or
/// tunes with `TILE_AUTOTUNE=1`), `Pick::Tune` tunes if no choice exists in
/// memory or on disk, `Pick::Fixed(i)` runs plan `i` of [`PLANS`]. At a pitch
/// that bulk copies take (K and N multiples of 8) both plans are the same
/// GEMM, so there is nothing to choose.
pub struct Gemm<E: Dtype> {
    any: AnyPitch<E>,
}

impl<E: Dtype> Default for Gemm<E> {
    fn default() -> Self {
        Self {
            any: AnyPitch::default(),
        }
    }
}

impl<E: Dtype> Gemm<E> {
    /// `c = a · b` (`a`: M × K, `b`: K × N, `c`: M × N) on the tensors'
    /// device's default stream; shapes that do not fit together are an
    /// error naming the buffer, and nothing runs.
    pub fn launch(
        &mut self,
        how: Pick,
        a: &Tensor<E>,
        b: &Tensor<E>,
        c: &mut Tensor<E>,
    ) -> Result<(), tile::Error> {
        let direct = |a: &Tensor<E>, b: &Tensor<E>, c: &mut Tensor<E>| match how {
            Pick::Tune => gemm::gemm_nn::tune().launch(a, b, c),
            _ => gemm::gemm_nn(a, b, c),
        };
        if padded_dims(a, b, c).is_none() {
            // One plan (or the kernel's error, naming the buffer).
            return direct(a, b, c);
        }
        let mut view = c.clone();
        let args = [
            ArgRef::input(a),
            ArgRef::input(b),
            ArgRef::output(&mut view),
        ];
        let any = &mut self.any;
        let mut run = |i: usize, c: &mut Tensor<E>| match i {
            0 => direct(a, b, c),
            _ => any.launch(a, b, c, &direct),
        };
        // While tuning, the plans write the caller's C (saved first, restored
        // after each plan); the runner sees it through a second view.
        let mut tuning_view = c.clone();
        let i = pick_plan(plans::<E>(), how, None, &args, &mut |i, _| {
            run(i, &mut tuning_view)
        })?;
        run(i, c)
    }

    /// The tuning reports of this process for `E` (each shape's plans and
    /// their times).
    pub fn reports() -> Vec<std::sync::Arc<tile::autotune::TuneReport>> {
        plans::<E>().reports()
    }
}

/// A B (K × N) that stays fixed across calls (weights), padded once.
pub struct FixedB<E: Dtype> {
    /// B padded to whole 16-byte rows (B itself when it has them).
    b: Tensor<E>,
    k: usize,
    n: usize,
    a: Option<Tensor<E>>,
    c: Option<Tensor<E>>,
}

impl<E: Dtype> FixedB<E> {
    /// Pads `b` (K × N) for every later [`FixedB::launch`].
    pub fn new(b: &Tensor<E>) -> Result<Self, tile::Error> {
        let &[k, n] = b.shape() else {
            return Err(tile::Error::NdimMismatch {
                kernel: "gemm_any_pitch",
                buffer: "b",
                expected: 2,
                got: b.ndim(),
            });
        };
        let b = if (up8(k), up8(n)) == (k, n) {
            // A clone shares B's storage.
            b.clone()
        } else {
            let mut bp = Tensor::zeros(&[up8(k), up8(n)], b.device())?;
            resize(b, &mut bp)?;
            bp
        };
        Ok(Self {
            b,
            k,
            n,
            a: None,
            c: None,
        })
    }

    /// `c = a · b` (`a`: M × K, `c`: M × N) with the B given to
    /// [`FixedB::new`]; a shape that does not fit is an error, and nothing
    /// runs.
    pub fn launch(
        &mut self,
        a: &Tensor<E>,
        c: &mut Tensor<E>,
        gemm: GemmFn<'_, E>,
    ) -> Result<(), tile::Error> {
        let (k, n) = (self.k, self.n);
        let (&[m, ka], &[mc, nc]) = (a.shape(), c.shape()) else {
            // The kernel names the buffer whose rank is off.
            return gemm(a, &self.b, c);
        };
        let mismatch = |buffer, dim, expected: usize, got| tile::Error::ShapeMismatch {
            kernel: "gemm_any_pitch",
            buffer,
            dim,
            expected: expected as i64,
            got,
            bound_by: None,
        };
        if ka != k {
            return Err(mismatch("a", 1, k, ka));
        }
        if mc != m {
            return Err(mismatch("c", 0, m, mc));
        }
        if nc != n {
            return Err(mismatch("c", 1, n, nc));
        }
        multiply((&mut self.a, &mut self.c), a, &self.b, (k, n), c, gemm)
    }
}

/// Checks `AnyPitch` with the default GEMM against the host reference.
fn check<E: Dtype>(
    name: &str,
    dev: Device,
    (m, n, k): (usize, usize, usize),
) -> Result<String, Box<dyn std::error::Error>> {
    let a = tile::testing::random_tensor::<E>(&[m, k], 61, dev)?;
    let b = tile::testing::random_tensor::<E>(&[k, n], 62, dev)?;
    let host = |t: &Tensor<E>| -> Result<Vec<f64>, tile::Error> {
        Ok(t.to_vec()?.iter().map(|x| x.to_f64()).collect())
    };
    let want = tile::testing::matmul_ref(&host(&a)?, &host(&b)?, (m, n, k), false, false);
    let gemm: GemmFn<'_, E> = &|a, b, c| gemm::gemm_nn(a, b, c);
    let mut any = AnyPitch::<E>::default();
    let mut fixed = FixedB::new(&b)?;
    let mut chooser = Gemm::<E>::default();
    let mut worst = 0.0f64;
    // B padded per call, twice (the second reuses the buffers), then B
    // padded once, twice, then the plan tuned for the shape and the plain
    // call that uses its choice.
    let ways = [
        "padded",
        "padded",
        "B padded once",
        "B padded once",
        "tuned plan",
        "plan",
    ];
    for way in ways {
        let mut c = Tensor::full(&[m, n], E::from_f64(f64::NAN), dev)?;
        match way {
            "padded" => any.launch(&a, &b, &mut c, gemm)?,
            "B padded once" => fixed.launch(&a, &mut c, gemm)?,
            "tuned plan" => chooser.launch(Pick::Tune, &a, &b, &mut c)?,
            _ => chooser.launch(Pick::Auto, &a, &b, &mut c)?,
        }
        let r = tile::testing::assert_allclose(&c.to_vec()?, &want, 5e-2, 2e-2)
            .map_err(|e| format!("{name} {m}x{n}x{k} ({way}): {e}"))?;
        worst = worst.max(r.max_abs);
    }
    // At an odd pitch both plans ran and matched.
    if (up8(k), up8(n)) != (k, n) {
        let reports = Gemm::<E>::reports();
        let r = reports
            .iter()
            .find(|r| r.shapes == [vec![m, k], vec![k, n], vec![m, n]])
            .ok_or_else(|| format!("{name} {m}x{n}x{k}: no plan report"))?;
        if r.rows.iter().any(|row| row.median_ms().is_none()) {
            return Err(format!("{name} {m}x{n}x{k}: a plan did not run: {r:?}").into());
        }
    }
    // A C that does not fit: an error from each, and C is not written.
    let mut c = Tensor::full(&[m, n + 1], E::from_f64(1.0), dev)?;
    if any.launch(&a, &b, &mut c, gemm).is_ok()
        || fixed.launch(&a, &mut c, gemm).is_ok()
        || chooser.launch(Pick::Tune, &a, &b, &mut c).is_ok()
    {
        return Err(format!("{name} {m}x{n}x{k}: a C of {m} x {} was accepted", n + 1).into());
    }
    if c.to_vec()?.iter().any(|x| x.to_f64() != 1.0) {
        return Err(format!("{name} {m}x{n}x{k}: a refused call wrote C").into());
    }
    Ok(format!("{name} {m}x{n}x{k}: max_abs_err={worst:.3e}"))
}

/// Every case at `shapes` (both dtypes), one line each.
pub fn run(
    dev: Device,
    shapes: &[(usize, usize, usize)],
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut lines = Vec::new();
    for &s in shapes {
        lines.push(check::<f16>("f16", dev, s)?);
        lines.push(check::<bf16>("bf16", dev, s)?);
    }
    Ok(lines)
}

/// Odd K, odd N, both, neither (the direct path), and a row of M = 1.
pub const SHAPES: [(usize, usize, usize); 5] = [
    (67, 128, 33),
    (64, 129, 64),
    (131, 135, 139),
    (64, 128, 64),
    (1, 257, 75),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let shapes = match args[..] {
        [m, n, k] => vec![(m, n, k)],
        [] => SHAPES.to_vec(),
        _ => return Err("usage: gemm_any_pitch [M N K]".into()),
    };
    for line in run(Device::default(), &shapes)? {
        println!("{line}");
    }
    println!("PASS (atol 5e-2, rtol 2e-2 against an f64 host reference)");
    Ok(())
}
