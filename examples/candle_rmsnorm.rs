//! A fused tile kernel inside a small candle model: RMS normalization with a learned
//! weight (`y = x / sqrt(mean(x²) + eps) * w`) as a candle custom op, on candle's CPU
//! backend (and its CUDA backend with the `candle-cuda` feature: the kernel reads and
//! writes candle's device memory, on candle's stream), checked against the same model
//! built from candle's own ops, then timed against candle's ops composition.
//!
//! `cargo run --release --features candle --example candle_rmsnorm [M] [ROWS]`
//! (`--features candle-cuda` for the GPU: see the README). `M` rows are checked
//! (default 64), `ROWS` rows are timed (default 16384 on a GPU, 1024 on the CPU).

use candle_core::{CpuStorage, CustomOp2, Device, Layout, Shape, Tensor, D};
use tile::candle::{cpu_view, to_candle};
use tile::TensorViewMut;

/// One row of `n` per block; `M` rows (any number).
#[tile::kernel(n = 256, threads = 128)]
pub fn rmsnorm_w(x: Tensor<f32, (M, n)>, w: Tensor<f32, (n,)>, y: TensorMut<f32, (M, n)>) {
    T::kernel(M, threads, |bx| {
        let row = T::alloc_fragment::<f32>([1, n]);
        let sq = T::alloc_fragment::<f32>([1, n]);
        let sum_sq = T::alloc_fragment::<f32>([1]);
        T::copy(x.at([bx, 0]), row);
        for (i, j) in T::parallel([1, n]) {
            sq[(i, j)] = row[(i, j)] * row[(i, j)];
        }
        T::reduce_sum(sq, sum_sq, 1);
        for (i, j) in T::parallel([1, n]) {
            row[(i, j)] = row[(i, j)] * T::rsqrt(sum_sq[i] / (n as f32) + 1e-5) * w[j];
        }
        T::copy(row, y.at([bx, 0]));
    });
}

/// The hidden size the kernel is compiled for.
pub const HIDDEN: usize = 256;

/// `rmsnorm_w` as a candle op: `x.apply_op2_no_bwd(&weight, &TileRmsNorm)`.
pub struct TileRmsNorm;

impl CustomOp2 for TileRmsNorm {
    fn name(&self) -> &'static str {
        "tile-rmsnorm"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        ws: &CpuStorage,
        wl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = cpu_view::<f32>(xs, xl)?;
        let w = cpu_view::<f32>(ws, wl)?;
        let mut out = vec![0f32; xl.shape().elem_count()];
        let mut y = TensorViewMut::from_slice_mut(&mut out, xl.dims()).map_err(to_candle)?;
        rmsnorm_w(&x, &w, &mut y).map_err(to_candle)?;
        drop(y);
        Ok((CpuStorage::F32(out), xl.shape().clone()))
    }

    #[cfg(feature = "candle-cuda")]
    fn cuda_fwd(
        &self,
        xs: &candle_core::CudaStorage,
        xl: &Layout,
        ws: &candle_core::CudaStorage,
        wl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        use tile::candle::{cuda_view, stream};
        let x = cuda_view::<f32>(xs, xl)?;
        let w = cuda_view::<f32>(ws, wl)?;
        let dev = &xs.device;
        // SAFETY: every element is written by the kernel before candle reads it.
        let mut out = unsafe { dev.alloc::<f32>(xl.shape().elem_count())? };
        {
            let mut y =
                TensorViewMut::from_cuda_slice_mut(&mut out, xl.dims()).map_err(to_candle)?;
            rmsnorm_w::on(&stream(dev))
                .launch(&x, &w, &mut y)
                .map_err(to_candle)?;
        }
        let out = candle_core::CudaStorage::wrap_cuda_slice(out, dev.clone());
        Ok((out, xl.shape().clone()))
    }
}

/// A small model: `relu(rmsnorm(x) · w1) · w2`, with the norm either tile's fused kernel
/// or candle's own ops.
pub struct Mlp {
    norm: Tensor,
    w1: Tensor,
    w2: Tensor,
}

impl Mlp {
    pub fn new(device: &Device) -> candle_core::Result<Mlp> {
        Ok(Mlp {
            norm: (Tensor::rand(0.5f32, 1.5, HIDDEN, device)?),
            w1: (Tensor::randn(0f32, 0.1, (HIDDEN, 4 * HIDDEN), device)?),
            w2: (Tensor::randn(0f32, 0.1, (4 * HIDDEN, HIDDEN), device)?),
        })
    }

    /// candle's RMS norm: `x / sqrt(mean(x²) + eps) * w`.
    pub fn reference_norm(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
        x.broadcast_div(&(ms + 1e-5)?.sqrt()?)?
            .broadcast_mul(&self.norm)
    }

    pub fn forward(&self, x: &Tensor, tile_norm: bool) -> candle_core::Result<Tensor> {
        let h = if tile_norm {
            x.apply_op2_no_bwd(&self.norm, &TileRmsNorm)?
        } else {
            self.reference_norm(x)?
        };
        h.matmul(&self.w1)?.relu()?.matmul(&self.w2)
    }
}

/// Runs the model both ways on `device` with `m` rows; returns the summary line.
/// `main` and `tests/interop_candle.rs` call it.
pub fn run(device: &Device, m: usize) -> Result<String, Box<dyn std::error::Error>> {
    let model = Mlp::new(device)?;
    let x = Tensor::randn(0f32, 1.0, (m, HIDDEN), device)?;
    let norm_err = (x.apply_op2_no_bwd(&model.norm, &TileRmsNorm)? - model.reference_norm(&x)?)?
        .abs()?
        .max_all()?
        .to_scalar::<f32>()?;
    let out_err = (model.forward(&x, true)? - model.forward(&x, false)?)?
        .abs()?
        .max_all()?
        .to_scalar::<f32>()?;
    if norm_err > 1e-4 || out_err > 1e-3 {
        return Err(format!(
            "tile rmsnorm differs from candle's: norm {norm_err:e}, model {out_err:e}"
        )
        .into());
    }
    // A non-contiguous input is refused by the launch checks, with tile's message.
    let square = Tensor::randn(0f32, 1.0, (HIDDEN, HIDDEN), device)?;
    let e = square
        .t()?
        .apply_op2_no_bwd(&model.norm, &TileRmsNorm)
        .map(|_| ());
    if !e.is_err_and(|e| e.to_string().contains("stride mismatch")) {
        return Err("a transposed input was not refused".into());
    }
    Ok(format!(
        "candle_rmsnorm: device={device:?} m={m} max_abs_err norm={norm_err:.3e} model={out_err:.3e}"
    ))
}

/// Median seconds per call of `f`: `samples` batches of `calls` calls after `warmup`
/// calls, each batch closed by a device synchronization (candle's CUDA ops return before
/// the GPU is done), so a batch is the time the device takes for `calls` calls.
fn median_per_call(
    device: &Device,
    warmup: usize,
    samples: usize,
    calls: usize,
    mut f: impl FnMut() -> candle_core::Result<Tensor>,
) -> candle_core::Result<f64> {
    for _ in 0..warmup {
        f()?;
    }
    device.synchronize()?;
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t0 = std::time::Instant::now();
        for _ in 0..calls {
            f()?;
        }
        device.synchronize()?;
        times.push(t0.elapsed().as_secs_f64() / calls as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[samples / 2])
}

/// Times tile's fused norm against candle's ops composition on `rows` rows, both on
/// `device` in this process; returns the summary line. GB/s counts `x` read once and
/// `y` written once (the least traffic a norm needs).
pub fn time(device: &Device, rows: usize) -> candle_core::Result<String> {
    let model = Mlp::new(device)?;
    let x = Tensor::randn(0f32, 1.0, (rows, HIDDEN), device)?;
    let (warmup, samples, calls) = (20, 31, 20);
    let tile = median_per_call(device, warmup, samples, calls, || {
        x.apply_op2_no_bwd(&model.norm, &TileRmsNorm)
    })?;
    let candle = median_per_call(device, warmup, samples, calls, || model.reference_norm(&x))?;
    let gbs = |s: f64| (2 * rows * HIDDEN * 4) as f64 / s / 1e9;
    Ok(format!(
        "candle_rmsnorm timing: device={device:?} rows={rows} hidden={HIDDEN} (median of \
         {samples}x{calls} calls after {warmup}): tile fused {:.2} us ({:.0} GB/s), candle \
         ops {:.2} us ({:.0} GB/s), {:.2}x",
        tile * 1e6,
        gbs(tile),
        candle * 1e6,
        gbs(candle),
        candle / tile
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = if cfg!(feature = "candle-cuda") {
        Device::cuda_if_available(0)?
    } else {
        Device::Cpu
    };
    let mut args = std::env::args().skip(1);
    let m = args.next().map(|s| s.parse()).transpose()?.unwrap_or(64);
    let rows = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(if device.is_cuda() { 16384 } else { 1024 });
    println!("{}", run(&device, m)?);
    println!("{}", time(&device, rows)?);
    Ok(())
}
