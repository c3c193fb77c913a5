//! The host ABI's argument checks.
//!
//! Invariants:
//! - Checks run before anything is compiled, launched or written, in TileLang's order:
//!   argument count, then per buffer parameter in declaration order: non-null pointer,
//!   ndim, dtype, shape, strides, alignment, device, 32-bit index range; then, when an
//!   argument views memory tile does not own, that no written argument overlaps another
//!   argument of a distinct storage. The first failure is reported.
//! - A dynamic dim is bound by the first parameter that carries it and checked against
//!   every later occurrence (including later dims of the same parameter).
//! - After a successful check every dynamic dim is bound and fits in `i32` (the CUDA ABI
//!   passes dims as `int`), and every buffer is contiguous row-major, aligned, on one
//!   device and indexable with 32-bit `int`.

use crate::arg::ArgRef;
use crate::device::Device;
use crate::dims::{each, Body};
use crate::error::{Error, Result};
use crate::spec::{DimSpec, KernelSpec};
use crate::tensor::stride_mismatch;

/// What a successful check establishes for the launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    /// Values of the dynamic dims, in `KernelSpec::dims` order.
    pub dims: Vec<i64>,
    /// The device of the first buffer, shared by all of them.
    pub device: Device,
}

/// Checks `args` against `spec` (see the module docs for the order).
pub fn check_args(spec: &KernelSpec, args: &[ArgRef<'_>]) -> Result<Bound> {
    let mut dims = vec![0i64; spec.dims.len()];
    let device = check_into(spec, args, &mut dims)?;
    Ok(Bound { dims, device })
}

/// [`check_args`] writing the dynamic dims into `dims` (`spec.dims.len()` long), so the
/// launch path needs no allocation; returns the device of the first buffer.
pub(crate) fn check_into(
    spec: &KernelSpec,
    args: &[ArgRef<'_>],
    dims: &mut [i64],
) -> Result<Device> {
    let result = checked::<Error>(spec, args, dims);
    // The warm path trusts `accepts`; in debug builds (every test) each check confirms
    // the two instantiations agree, dims included.
    #[cfg(debug_assertions)]
    {
        let mut again = vec![0i64; dims.len()];
        let fast = accepts(spec, args, &mut again);
        assert_eq!(fast, result.is_ok(), "accepts disagrees with check_into");
        if fast {
            assert_eq!(again, dims, "accepts bound other dims");
        }
    }
    result
}

/// Whether [`check_into`] would accept `args`, binding the same `dims`; no error is
/// built. The warm launch path inlines it where `spec` is a kernel's `static SPEC`, so
/// the compiler folds every read of the spec into constants (see `launch::warm`).
#[inline(always)]
pub(crate) fn accepts(spec: &KernelSpec, args: &[ArgRef<'_>], dims: &mut [i64]) -> bool {
    checked::<Rejected>(spec, args, dims).is_ok()
}

/// What a failed check yields: the full error for [`check_into`], nothing for
/// [`accepts`] (its error closures are never called, so the compiler drops them).
trait Failure {
    /// Whether the checks' loops are written out (see [`each`]): only where the spec is
    /// a constant, else each of up to 8 copies would carry every error's construction.
    const UNROLL: bool;

    fn from(error: impl FnOnce() -> Error) -> Self;
}

impl Failure for Error {
    const UNROLL: bool = false;

    #[inline(always)]
    fn from(error: impl FnOnce() -> Error) -> Error {
        error()
    }
}

struct Rejected;

impl Failure for Rejected {
    const UNROLL: bool = true;

    #[inline(always)]
    fn from(_: impl FnOnce() -> Error) -> Rejected {
        Rejected
    }
}

/// The checks, once for both uses. Loops run over the spec's lengths through
/// [`each`], with their bodies in `#[inline(always)]` functions, so that with a constant
/// spec they unroll into straight-line code in a generated launcher.
#[inline(always)]
fn checked<F: Failure>(
    spec: &KernelSpec,
    args: &[ArgRef<'_>],
    dims: &mut [i64],
) -> Result<Device, F> {
    let kernel = spec.name;
    if args.len() != spec.params.len() {
        return Err(F::from(|| Error::NumArgs {
            kernel,
            expected: spec.params.len(),
            got: args.len(),
        }));
    }
    if spec.dims.len() > 64 || dims.len() != spec.dims.len() {
        return Err(F::from(|| Error::Spec {
            kernel,
            message: format!(
                "{} dynamic dims (at most 64 are supported)",
                spec.dims.len()
            ),
        }));
    }
    // Bit n: dim n is bound.
    let mut bound = 0u64;
    let device = args.first().map_or(Device::Cpu, |a| a.device);
    each(
        F::UNROLL,
        spec.params.len(),
        Params {
            spec,
            args,
            device,
            dims: &mut *dims,
            bound: &mut bound,
        },
    )?;
    each(F::UNROLL, spec.dims.len(), |n: usize| {
        if bound & (1 << n) != 0 {
            return Ok(());
        }
        Err(F::from(|| Error::Spec {
            kernel,
            message: format!(
                "dynamic dim {} is not carried by any parameter",
                spec.dims[n]
            ),
        }))
    })?;
    if any_external(args) {
        if let Some((j, i)) = overlap(args) {
            return Err(F::from(|| Error::Aliased {
                kernel,
                buffer: spec.params[j].name,
                other: spec.params[i].name,
            }));
        }
    }
    Ok(device)
}

/// Whether some argument views memory tile does not own (views, imports): only those
/// can share memory across storages, so only then is [`overlap`] needed.
#[inline(always)]
fn any_external(args: &[ArgRef<'_>]) -> bool {
    let mut any = false;
    for a in args {
        any |= a.storage.is_external();
    }
    any
}

/// The first pair `(later, earlier)` of arguments over distinct storages whose bytes
/// overlap while one of them is written. Runs after the other checks, so every argument
/// is contiguous: its bytes are `numel × size` from its pointer.
#[inline(never)]
fn overlap(args: &[ArgRef<'_>]) -> Option<(usize, usize)> {
    let range = |a: &ArgRef<'_>| {
        let n = a.shape.iter().product::<usize>() * a.dtype.size();
        (a.ptr, a.ptr + n)
    };
    for (j, b) in args.iter().enumerate() {
        let (b0, b1) = range(b);
        for (i, a) in args[..j].iter().enumerate() {
            let (a0, a1) = range(a);
            let distinct = !std::sync::Arc::ptr_eq(a.storage, b.storage);
            if distinct && (a.output || b.output) && a0 < b1 && b0 < a1 {
                return Some((j, i));
            }
        }
    }
    None
}

/// The loop body over buffer parameters (a [`Body`], see there for why not a closure).
struct Params<'s, 'a, 'b> {
    spec: &'s KernelSpec,
    args: &'s [ArgRef<'a>],
    device: Device,
    dims: &'b mut [i64],
    bound: &'b mut u64,
}

impl<F: Failure> Body<F> for Params<'_, '_, '_> {
    #[inline(always)]
    fn run(&mut self, i: usize) -> Result<(), F> {
        check_param(
            self.spec,
            i,
            &self.args[i],
            self.device,
            self.dims,
            self.bound,
        )
    }
}

/// The loop body over one parameter's dims.
struct Dims<'s, 'b> {
    spec: &'s KernelSpec,
    i: usize,
    shape: &'s [usize],
    dims: &'b mut [i64],
    bound: &'b mut u64,
}

impl<F: Failure> Body<F> for Dims<'_, '_> {
    #[inline(always)]
    fn run(&mut self, dim: usize) -> Result<(), F> {
        check_dim(
            self.spec,
            self.i,
            dim,
            self.shape[dim],
            self.dims,
            self.bound,
        )
    }
}

/// The checks of buffer parameter `i`, in the module's order.
#[inline(always)]
fn check_param<F: Failure>(
    spec: &KernelSpec,
    i: usize,
    arg: &ArgRef<'_>,
    device: Device,
    dims: &mut [i64],
    bound: &mut u64,
) -> Result<(), F> {
    let (kernel, param) = (spec.name, &spec.params[i]);
    let buffer = param.name;
    if arg.ptr == 0 && numel(arg.shape) != Some(0) {
        return Err(F::from(|| Error::NullPointer { kernel, buffer }));
    }
    let ndim = param.shape.len();
    if arg.shape.len() != ndim {
        return Err(F::from(|| Error::NdimMismatch {
            kernel,
            buffer,
            expected: ndim,
            got: arg.shape.len(),
        }));
    }
    // From here on the argument's dims are read through a slice of the spec's length.
    let shape = &arg.shape[..ndim];
    if arg.dtype != param.dtype {
        return Err(F::from(|| Error::DtypeMismatch {
            kernel,
            buffer,
            expected: param.dtype,
            got: arg.dtype,
        }));
    }
    each(
        F::UNROLL,
        ndim,
        Dims {
            spec,
            i,
            shape,
            dims,
            bound,
        },
    )?;
    if let Some((dim, expected, got)) = stride_mismatch(shape, arg.strides) {
        return Err(F::from(|| Error::StrideMismatch {
            kernel,
            buffer,
            dim,
            expected,
            got,
            output: param.output,
        }));
    }
    if param.align > 1 && !arg.ptr.is_multiple_of(param.align as usize) {
        return Err(F::from(|| Error::Misaligned {
            kernel,
            buffer,
            align: param.align,
            output: param.output,
        }));
    }
    if arg.device != device {
        return Err(F::from(|| Error::DeviceMismatch {
            kernel,
            buffer,
            expected: device,
            got: arg.device,
        }));
    }
    match numel(shape) {
        Some(n) if n <= i32::MAX as usize => Ok(()),
        _ => Err(F::from(|| Error::IndexRange { kernel, buffer })),
    }
}

/// Dim `dim` (extent `got`) of buffer parameter `i` against the spec: a static extent
/// must match; a dynamic one is bound by its first carrier and must match after that.
#[inline(always)]
fn check_dim<F: Failure>(
    spec: &KernelSpec,
    i: usize,
    dim: usize,
    got: usize,
    dims: &mut [i64],
    bound: &mut u64,
) -> Result<(), F> {
    let (kernel, param) = (spec.name, &spec.params[i]);
    let buffer = param.name;
    match param.shape[dim] {
        DimSpec::Static(expected) => {
            if i64::try_from(got).ok() != Some(expected) {
                return Err(F::from(|| Error::ShapeMismatch {
                    kernel,
                    buffer,
                    dim,
                    expected,
                    got,
                    bound_by: None,
                }));
            }
        }
        DimSpec::Dyn(n) => {
            let n = n as usize;
            let Some(&name) = spec.dims.get(n) else {
                return Err(F::from(|| Error::Spec {
                    kernel,
                    message: format!(
                        "parameter {buffer} uses dynamic dim #{n}, but the kernel declares {}",
                        spec.dims.len()
                    ),
                }));
            };
            if *bound & (1 << n) != 0 {
                if i64::try_from(got).ok() != Some(dims[n]) {
                    let expected = dims[n];
                    return Err(F::from(|| Error::ShapeMismatch {
                        kernel,
                        buffer,
                        dim,
                        expected,
                        got,
                        bound_by: Some((name, binder(spec, n))),
                    }));
                }
            } else {
                // Dims are passed to CUDA code as `int`.
                if got > i32::MAX as usize {
                    return Err(F::from(|| Error::IndexRange { kernel, buffer }));
                }
                dims[n] = got as i64;
                *bound |= 1 << n;
            }
        }
    }
    Ok(())
}

/// Element count, `None` on overflow.
#[inline(always)]
fn numel(shape: &[usize]) -> Option<usize> {
    let mut n = 1usize;
    each(true, shape.len(), |d: usize| {
        n = n.checked_mul(shape[d]).ok_or(())?;
        Ok::<(), ()>(())
    })
    .ok()?;
    Some(n)
}

/// The parameter that binds dynamic dim `n`: the first that carries it.
fn binder(spec: &KernelSpec, n: usize) -> &'static str {
    spec.params
        .iter()
        .find(|p| p.shape.contains(&DimSpec::Dyn(n as u32)))
        .map_or("?", |p| p.name)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::spec::{CpuKernel, CudaKernel, GridExpr, ParamSpec};
    use crate::tensor::Tensor;

    static ONE: GridExpr = GridExpr::Const(1);

    pub(crate) const fn spec_with(
        name: &'static str,
        params: &'static [ParamSpec],
        dims: &'static [&'static str],
    ) -> KernelSpec {
        KernelSpec {
            name,
            params,
            scalars: &[],
            dims,
            grid: [&ONE, &ONE, &ONE],
            threads: 128,
            ir: "",
            cpu: CpuKernel {
                key: "0000",
                symbol: "none",
                source: "",
                aot: None,
            },
            cuda: CudaKernel {
                key: "0000",
                entry: "none",
                source: "",
                cubins: &[],
                shared_bytes: 0,
            },
            cuda_sm90a: None,
        }
    }

    const fn param(
        name: &'static str,
        dtype: DType,
        shape: &'static [DimSpec],
        output: bool,
        align: u32,
    ) -> ParamSpec {
        ParamSpec {
            name,
            dtype,
            shape,
            output,
            align,
        }
    }

    const N: DimSpec = DimSpec::Dyn(0);

    // vecadd(a: f32[N], b: f32[N], c: mut f32[N]), 16-byte vector accesses.
    static VECADD: KernelSpec = spec_with(
        "vecadd",
        &[
            param("a", DType::F32, &[N], false, 16),
            param("b", DType::F32, &[N], false, 16),
            param("c", DType::F32, &[N], true, 16),
        ],
        &["N"],
    );

    // k(a: f16[1024, N], b: f16[N, 4]).
    static MIXED: KernelSpec = spec_with(
        "vecadd",
        &[
            param("a", DType::F16, &[DimSpec::Static(1024), N], false, 2),
            param("b", DType::F16, &[N, DimSpec::Static(4)], false, 2),
        ],
        &["N"],
    );

    fn msg(r: Result<Bound>) -> String {
        match r {
            Ok(b) => format!("unexpectedly ok: {b:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn f32s(shape: &[usize]) -> Tensor<f32> {
        Tensor::zeros(shape, Device::Cpu).unwrap()
    }

    fn f16s(shape: &[usize]) -> Tensor<half::f16> {
        Tensor::zeros(shape, Device::Cpu).unwrap()
    }

    #[test]
    fn accepts_good_args() -> Result<()> {
        let (a, b) = (f32s(&[1000]), f32s(&[1000]));
        let mut c = f32s(&[1000]);
        let bound = check_args(
            &VECADD,
            &[ArgRef::input(&a), ArgRef::input(&b), ArgRef::output(&mut c)],
        )?;
        assert_eq!(bound.dims, vec![1000]);
        assert_eq!(bound.device, Device::Cpu);
        Ok(())
    }

    #[test]
    fn num_args() {
        let (a, b) = (f32s(&[8]), f32s(&[8]));
        assert_eq!(
            msg(check_args(&VECADD, &[ArgRef::input(&a), ArgRef::input(&b)])),
            "kernel vecadd: num_args should be 3, got 2"
        );
    }

    #[test]
    fn null_pointer_only_when_non_empty() {
        let (a, b, c) = (f32s(&[8]), f32s(&[8]), f32s(&[8]));
        let mut null = ArgRef::input(&a);
        null.ptr = 0;
        assert_eq!(
            msg(check_args(
                &VECADD,
                &[null, ArgRef::input(&b), ArgRef::input(&c)]
            )),
            "kernel vecadd input a is expected to have non-NULL pointer"
        );
        let (a0, b0, c0) = (f32s(&[0]), f32s(&[0]), f32s(&[0]));
        let mut null = ArgRef::input(&a0);
        null.ptr = 0;
        assert!(check_args(&VECADD, &[null, ArgRef::input(&b0), ArgRef::input(&c0)]).is_ok());
    }

    #[test]
    fn ndim_before_dtype() {
        let a = Tensor::<half::bf16>::zeros(&[2, 3, 4], Device::Cpu).unwrap();
        let b = f16s(&[4, 4]);
        assert_eq!(
            msg(check_args(&MIXED, &[ArgRef::input(&a), ArgRef::input(&b)])),
            "kernel vecadd input a ndim mismatch, expected 2, got 3"
        );
        let a = Tensor::<half::bf16>::zeros(&[1024, 4], Device::Cpu).unwrap();
        assert_eq!(
            msg(check_args(&MIXED, &[ArgRef::input(&a), ArgRef::input(&b)])),
            "kernel vecadd input a dtype mismatch, expected float16, got bfloat16"
        );
    }

    #[test]
    fn static_and_dynamic_shapes() {
        let (a, b) = (f16s(&[1000, 4]), f16s(&[4, 4]));
        assert_eq!(
            msg(check_args(&MIXED, &[ArgRef::input(&a), ArgRef::input(&b)])),
            "kernel vecadd input a shape mismatch: dim 0 expected 1024, got 1000"
        );
        let (a, b, c) = (f32s(&[1000]), f32s(&[999]), f32s(&[1000]));
        assert_eq!(
            msg(check_args(
                &VECADD,
                &[ArgRef::input(&a), ArgRef::input(&b), ArgRef::input(&c)]
            )),
            "kernel vecadd input b shape mismatch: dim 0 expected 1000 (N bound by a), got 999"
        );
        // N bound by a's dim 1, checked against b's dim 0.
        let (a, b) = (f16s(&[1024, 6]), f16s(&[5, 4]));
        assert_eq!(
            msg(check_args(&MIXED, &[ArgRef::input(&a), ArgRef::input(&b)])),
            "kernel vecadd input b shape mismatch: dim 0 expected 6 (N bound by a), got 5"
        );
    }

    #[test]
    fn strides_relaxed_for_unit_dims() {
        static T2: KernelSpec = spec_with(
            "vecadd",
            &[param("a", DType::F32, &[N, DimSpec::Dyn(1)], false, 4)],
            &["M", "N"],
        );
        let base = f32s(&[4, 6]);
        let t = base.transpose(0, 1);
        assert_eq!(
            msg(check_args(&T2, &[ArgRef::input(&t)])),
            "kernel vecadd input a stride mismatch: dim 1 expected 1, got 6 (kernels take row-major tensors; `.contiguous()` makes a row-major copy)"
        );
        // A column [4, 1] with strides [6, 1] is not contiguous.
        let col = base.slice(1, 2..3).unwrap();
        assert_eq!(
            msg(check_args(&T2, &[ArgRef::input(&col)])),
            "kernel vecadd input a stride mismatch: dim 0 expected 1, got 6 (kernels take row-major tensors; `.contiguous()` makes a row-major copy)"
        );
        // A row seen as [6, 1] with strides [1, 6]: the unit dim's stride is ignored.
        let row = base.slice(0, 2..3).unwrap().transpose(0, 1);
        assert_eq!(row.strides(), &[1, 6]);
        assert!(check_args(&T2, &[ArgRef::input(&row)]).is_ok());
    }

    #[test]
    fn stride_message_1d() {
        static V: KernelSpec =
            spec_with("vecadd", &[param("a", DType::F32, &[N], false, 4)], &["N"]);
        let base = f32s(&[16]);
        let mut every_other = ArgRef::input(&base);
        every_other.shape = &[8];
        every_other.strides = &[2];
        assert_eq!(
            msg(check_args(&V, &[every_other])),
            "kernel vecadd input a stride mismatch: dim 0 expected 1, got 2 (kernels take row-major tensors; `.contiguous()` makes a row-major copy)"
        );
    }

    #[test]
    fn alignment() {
        let base = f32s(&[1001]);
        let (b, c) = (f32s(&[1000]), f32s(&[1000]));
        let a = base.slice(0, 1..1001).unwrap();
        assert_eq!(
            msg(check_args(
                &VECADD,
                &[ArgRef::input(&a), ArgRef::input(&b), ArgRef::input(&c)]
            )),
            "kernel vecadd input a misaligned: data pointer must be aligned to 16 bytes (a view that starts inside its allocation; `.contiguous()` makes an aligned copy)"
        );
        let a4 = f32s(&[1004]).slice(0, 4..1004).unwrap();
        assert!(check_args(
            &VECADD,
            &[ArgRef::input(&a4), ArgRef::input(&b), ArgRef::input(&c)]
        )
        .is_ok());
    }

    #[test]
    fn device_mismatch_after_shape() {
        let (a, b, c) = (f32s(&[16]), f32s(&[16]), f32s(&[16]));
        let mut bad = ArgRef::input(&b);
        bad.device = Device::Cuda(0);
        assert_eq!(
            msg(check_args(
                &VECADD,
                &[ArgRef::input(&a), bad, ArgRef::input(&c)]
            )),
            "kernel vecadd input b device mismatch, expected cpu, got cuda:0"
        );
        // Wrong device and wrong shape on the same buffer: shape is reported.
        let b15 = f32s(&[15]);
        let mut bad = ArgRef::input(&b15);
        bad.device = Device::Cuda(0);
        assert_eq!(
            msg(check_args(
                &VECADD,
                &[ArgRef::input(&a), bad, ArgRef::input(&c)]
            )),
            "kernel vecadd input b shape mismatch: dim 0 expected 16 (N bound by a), got 15"
        );
        // The first buffer fixes the device.
        let mut first = ArgRef::input(&a);
        first.device = Device::Cuda(0);
        assert_eq!(
            msg(check_args(
                &VECADD,
                &[first, ArgRef::input(&b), ArgRef::input(&c)]
            )),
            "kernel vecadd input b device mismatch, expected cuda:0, got cpu"
        );
    }

    #[test]
    fn index_range() {
        let (a, b, c) = (f32s(&[4]), f32s(&[4]), f32s(&[4]));
        let big = [1usize << 31];
        let strides = [1isize];
        let mut huge = ArgRef::input(&a);
        huge.shape = &big;
        huge.strides = &strides;
        // Binding N = 2^31 already fails: it does not fit an `int`.
        assert_eq!(
            msg(check_args(
                &VECADD,
                &[huge, ArgRef::input(&b), ArgRef::input(&c)]
            )),
            "kernel vecadd input a exceeds the 32-bit index range"
        );
        static M2: KernelSpec = spec_with(
            "vecadd",
            &[param("a", DType::F32, &[N, N], false, 4)],
            &["N"],
        );
        let sq = [1usize << 16, 1 << 16];
        let sq_strides = [1isize << 16, 1];
        let mut huge = ArgRef::input(&a);
        huge.shape = &sq;
        huge.strides = &sq_strides;
        assert_eq!(
            msg(check_args(&M2, &[huge])),
            "kernel vecadd input a exceeds the 32-bit index range"
        );
    }

    #[test]
    fn unbound_dim_is_a_spec_error() {
        static S: KernelSpec = spec_with(
            "k",
            &[param("a", DType::F32, &[DimSpec::Static(4)], false, 4)],
            &["N"],
        );
        let a = f32s(&[4]);
        assert!(matches!(
            check_args(&S, &[ArgRef::input(&a)]),
            Err(Error::Spec { .. })
        ));
    }
}
