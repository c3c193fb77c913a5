//! The runtime's one error type.
//!
//! Invariants:
//! - Argument-check variants carry the kernel name, the buffer (the parameter name as
//!   declared) and the field that failed; their `Display` text is part of the API (it
//!   follows TileLang's wording, with the word `input` for every buffer parameter) and is
//!   asserted by tests.
//! - Compiler-tool failures keep what is needed to reproduce them outside the process:
//!   the options, the log or stderr, the path of the source written to disk and a
//!   command line.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::device::Device;
use crate::dtype::DType;

/// `Result` with the runtime's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong between a typed launcher call and a finished launch.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The launcher passed a different number of arguments than the kernel declares.
    NumArgs {
        /// The kernel's name.
        kernel: &'static str,
        /// The number of parameters the kernel declares.
        expected: usize,
        /// The number of arguments passed.
        got: usize,
    },
    /// A non-empty buffer has a null data pointer.
    NullPointer {
        /// The kernel's name.
        kernel: &'static str,
        /// The buffer parameter's name, as declared.
        buffer: &'static str,
    },
    /// A buffer has another number of dims than its parameter declares.
    NdimMismatch {
        /// The kernel's name.
        kernel: &'static str,
        /// The buffer parameter's name, as declared.
        buffer: &'static str,
        /// The number of dims the parameter declares.
        expected: usize,
        /// The number of dims of the argument.
        got: usize,
    },
    /// A buffer has another element type than its parameter declares.
    DtypeMismatch {
        /// The kernel's name.
        kernel: &'static str,
        /// The buffer parameter's name, as declared.
        buffer: &'static str,
        /// The parameter's declared dtype.
        expected: DType,
        /// The argument's dtype.
        got: DType,
    },
    /// A buffer's extent differs from the parameter's static extent or from the value a
    /// dynamic dim was bound to by an earlier parameter.
    ///
    /// `bound_by` is `Some((dim name, parameter))` when the expected extent is a dynamic
    /// dim bound by an earlier parameter.
    ShapeMismatch {
        /// The kernel's name.
        kernel: &'static str,
        /// The buffer parameter's name, as declared.
        buffer: &'static str,
        /// The index of the dim that differs.
        dim: usize,
        /// The extent the kernel expects for that dim.
        expected: i64,
        /// The argument's extent.
        got: usize,
        /// The dynamic dim's name and the parameter that bound it, if any.
        bound_by: Option<(&'static str, &'static str)>,
    },
    /// Buffers must be contiguous row-major (dims of extent 1 may have any stride).
    StrideMismatch {
        /// The kernel's name.
        kernel: &'static str,
        /// The buffer parameter's name, as declared.
        buffer: &'static str,
        /// The index of the first dim (from the last) whose stride is not row-major.
        dim: usize,
        /// The row-major stride of that dim, in elements.
        expected: isize,
        /// The argument's stride, in elements.
        got: isize,
        /// The parameter is written (its role in the message: `output`, not `input`).
        output: bool,
    },
    /// A buffer's data pointer is not aligned as the kernel requires (a view starting
    /// inside its allocation).
    Misaligned {
        /// The kernel's name.
        kernel: &'static str,
        /// The buffer parameter's name, as declared.
        buffer: &'static str,
        /// The required alignment, in bytes.
        align: u32,
        /// The parameter is written (its role in the message: `output`, not `input`).
        output: bool,
    },
    /// A buffer is on another device than the first buffer (which fixes the launch's device).
    DeviceMismatch {
        /// The kernel's name.
        kernel: &'static str,
        /// The buffer parameter's name, as declared.
        buffer: &'static str,
        /// The first buffer's device.
        expected: Device,
        /// The buffer's device.
        got: Device,
    },
    /// The stream given to the launch is on another device than the tensors.
    StreamDeviceMismatch {
        /// The kernel's name.
        kernel: &'static str,
        /// The tensors' device.
        tensors: Device,
        /// The stream's device.
        stream: Device,
    },
    /// The generated code indexes with 32-bit `int`: a buffer with more than `i32::MAX`
    /// elements, or an extent above `i32::MAX`, is refused.
    IndexRange {
        /// The kernel's name.
        kernel: &'static str,
        /// The buffer parameter's name, as declared.
        buffer: &'static str,
    },
    /// Two arguments over distinct storages share memory and one of them is written
    /// (views or imports of one memory; the same tensor or view may be passed twice).
    Aliased {
        /// The kernel's name.
        kernel: &'static str,
        /// One of the two parameters.
        buffer: &'static str,
        /// The parameter whose argument overlaps `buffer`'s.
        other: &'static str,
    },
    /// A launch recorded by [`Graph::capture`](crate::Graph::capture) names a borrowed
    /// view: the graph would outlive the borrow.
    ScopedCapture {
        /// The kernel's name.
        kernel: &'static str,
    },
    /// DLPack or another interop import/export refused a tensor.
    Interop {
        /// What was refused and why (the whole `Display` text).
        message: String,
    },
    /// The kernel spec itself is inconsistent (a macro or build bug, not a user error).
    Spec {
        /// The kernel's name.
        kernel: &'static str,
        /// What is inconsistent.
        message: String,
    },
    /// A grid extent could not be evaluated (division by zero, overflow) or is out of range.
    Grid {
        /// The kernel's name.
        kernel: &'static str,
        /// The grid axis: 0, 1 or 2 for x, y, z.
        axis: usize,
        /// What went wrong.
        message: String,
    },
    /// No usable CUDA driver or device.
    NoCuda {
        /// Why CUDA is not usable.
        reason: String,
    },
    /// `Device::cuda(n)` for an ordinal that does not exist.
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// The number of CUDA devices found.
        count: usize,
    },
    /// A CUDA driver API call failed.
    Driver {
        /// The driver call that failed (or the operation it served).
        call: &'static str,
        /// The driver's error name and text.
        message: String,
    },
    /// NVRTC could not be loaded or is unusable.
    NvrtcUnavailable {
        /// Why NVRTC is not usable.
        reason: String,
    },
    /// No include folder holds `cuda_fp16.h`, which the generated CUDA includes.
    CudaHeaders {
        /// The folders searched.
        searched: Vec<PathBuf>,
    },
    /// NVRTC rejected the generated source.
    Nvrtc {
        /// The kernel's name.
        kernel: &'static str,
        /// NVRTC's compilation log.
        log: String,
        /// The options passed to NVRTC.
        options: Vec<String>,
        /// Where the generated source was written.
        source: PathBuf,
        /// A command line that compiles the source the same way outside the process.
        reproduce: String,
    },
    /// The C compiler failed (or could not be started).
    Cc {
        /// The kernel's name.
        kernel: &'static str,
        /// The compiler command line, to reproduce the failure.
        command: String,
        /// The compiler's standard error (or why it could not be started).
        stderr: String,
        /// Where the generated source was written.
        source: PathBuf,
    },
    /// A compiled kernel could not be loaded (dlopen, missing symbol, bad cubin).
    Load {
        /// The kernel's name.
        kernel: &'static str,
        /// The shared library or device binary that failed to load.
        path: PathBuf,
        /// The loader's error.
        message: String,
    },
    /// The disk cache (or a temporary build folder) could not be read or written.
    Cache {
        /// The file or folder involved.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// A CPU worker thread could not be started.
    Thread {
        /// The I/O error from spawning the thread.
        source: io::Error,
    },
    /// `TILE_DEVICE` holds something other than `cpu`, `cuda` or `cuda:N`.
    InvalidDevice {
        /// The variable's value.
        value: String,
    },
    /// Tensor construction: the data length does not match the shape.
    TensorLen {
        /// The shape asked for.
        shape: Vec<usize>,
        /// The data's length, in elements.
        len: usize,
    },
    /// Tensor construction: the shape's element count (or byte size) overflows.
    TensorTooLarge {
        /// The shape asked for.
        shape: Vec<usize>,
    },
    /// A tensor view or copy request that does not fit the tensor.
    TensorView {
        /// What does not fit (the whole `Display` text).
        message: String,
    },
    /// The kernel has no code for the target of the tensors' device (a CUDA-only kernel
    /// launched on the CPU).
    NoTargetCode {
        /// The kernel's name.
        kernel: &'static str,
        /// The target asked for: `"cpu"` or `"cuda"`.
        target: &'static str,
    },
    /// A graph replayed on a stream of another device.
    GraphDevice {
        /// The device the graph was captured on.
        graph: Device,
        /// The replay stream's device.
        stream: Device,
    },
    /// [`Profiler::assert_allclose`](crate::Profiler::assert_allclose): an output differs
    /// from the reference.
    Mismatch {
        /// The kernel's name.
        kernel: &'static str,
        /// The output parameter that differs.
        buffer: &'static str,
        /// Where and by how much it differs.
        message: String,
    },
    /// [`Profiler`](crate::Profiler) misuse: an unknown or unbound dim, a dtype it cannot
    /// generate, a reference with the wrong number of outputs.
    Profile {
        /// The kernel's name.
        kernel: &'static str,
        /// What was wrong.
        message: String,
    },
    /// Choosing among a kernel's variants: an explicit configuration that is not one of
    /// them, tuning inside a graph capture, or no variant that ran and matched.
    Tune {
        /// The kernel's name.
        kernel: &'static str,
        /// What went wrong.
        message: String,
    },
    /// A collective ([`crate::dist`]) or communicator refused its arguments before NCCL
    /// saw them: a dtype NCCL has no type for, a tensor on another device or not
    /// contiguous, sizes that do not match the world size, a bad root or rank. Nothing
    /// was queued or written.
    Collective {
        /// The operation (`all_reduce`, `UniqueId::from_bytes`, ...).
        op: &'static str,
        /// The rank whose arguments were refused.
        rank: usize,
        /// The argument refused.
        buffer: &'static str,
        /// Why it was refused.
        message: String,
    },
    /// An NCCL call failed (`rank` is `None` for a call of no single rank:
    /// `ncclCommInitAll`, `ncclGroupEnd`).
    Nccl {
        /// The NCCL call or operation that failed.
        op: &'static str,
        /// The rank it failed on, if it belongs to one.
        rank: Option<usize>,
        /// NCCL's error.
        message: String,
    },
    /// The NCCL library could not be loaded or is unusable.
    NcclUnavailable {
        /// Why NCCL is not usable.
        reason: String,
    },
}

impl Error {
    pub(crate) fn driver(call: &'static str, err: cudarc::driver::DriverError) -> Error {
        let name = err
            .error_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("{:?}", err.0));
        let text = err
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let message = if text.is_empty() {
            name
        } else {
            format!("{name}: {text}")
        };
        Error::Driver { call, message }
    }

    pub(crate) fn cache(path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Cache {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn view(message: impl Into<String>) -> Error {
        Error::TensorView {
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NumArgs {
                kernel,
                expected,
                got,
            } => write!(f, "kernel {kernel}: num_args should be {expected}, got {got}"),
            Error::NullPointer { kernel, buffer } => write!(
                f,
                "kernel {kernel} input {buffer} is expected to have non-NULL pointer"
            ),
            Error::NdimMismatch {
                kernel,
                buffer,
                expected,
                got,
            } => write!(
                f,
                "kernel {kernel} input {buffer} ndim mismatch, expected {expected}, got {got}"
            ),
            Error::DtypeMismatch {
                kernel,
                buffer,
                expected,
                got,
            } => write!(
                f,
                "kernel {kernel} input {buffer} dtype mismatch, expected {expected}, got {got}"
            ),
            Error::ShapeMismatch {
                kernel,
                buffer,
                dim,
                expected,
                got,
                bound_by,
            } => {
                write!(
                    f,
                    "kernel {kernel} input {buffer} shape mismatch: dim {dim} expected {expected}"
                )?;
                if let Some((name, by)) = bound_by {
                    write!(f, " ({name} bound by {by})")?;
                }
                write!(f, ", got {got}")
            }
            Error::StrideMismatch {
                kernel,
                buffer,
                dim,
                expected,
                got,
                output,
            } => write!(
                f,
                "kernel {kernel} {} {buffer} stride mismatch: dim {dim} expected {expected}, got {got} (kernels take row-major tensors; `.contiguous()` makes a row-major copy)",
                role(*output)
            ),
            Error::Misaligned {
                kernel,
                buffer,
                align,
                output,
            } => write!(
                f,
                "kernel {kernel} {} {buffer} misaligned: data pointer must be aligned to {align} bytes (a view that starts inside its allocation; `.contiguous()` makes an aligned copy)",
                role(*output)
            ),
            Error::DeviceMismatch {
                kernel,
                buffer,
                expected,
                got,
            } => write!(
                f,
                "kernel {kernel} input {buffer} device mismatch, expected {expected}, got {got}"
            ),
            Error::StreamDeviceMismatch {
                kernel,
                tensors,
                stream,
            } => write!(
                f,
                "kernel {kernel} stream device mismatch, expected {tensors} (the tensors' device), got {stream}"
            ),
            Error::IndexRange { kernel, buffer } => write!(
                f,
                "kernel {kernel} input {buffer} exceeds the 32-bit index range"
            ),
            Error::Aliased {
                kernel,
                buffer,
                other,
            } => write!(
                f,
                "kernel {kernel} input {buffer} overlaps input {other} in memory and one of them is written (distinct views of one memory; pass the same view to update in place)"
            ),
            Error::ScopedCapture { kernel } => write!(
                f,
                "kernel {kernel}: a borrowed view cannot be captured into a graph (the graph would outlive the borrow); use a tile tensor"
            ),
            Error::Interop { message } => write!(f, "{message}"),
            Error::Spec { kernel, message } => {
                write!(f, "kernel {kernel}: invalid kernel spec: {message}")
            }
            Error::Grid {
                kernel,
                axis,
                message,
            } => {
                let axis = ["x", "y", "z"].get(*axis).copied().unwrap_or("?");
                write!(f, "kernel {kernel}: grid {axis}: {message}")
            }
            Error::NoCuda { reason } => write!(f, "no usable CUDA device: {reason}"),
            Error::NoSuchDevice { ordinal, count } => write!(
                f,
                "CUDA device cuda:{ordinal} does not exist ({count} CUDA device(s) found)"
            ),
            Error::Driver { call, message } => write!(f, "CUDA driver call {call} failed: {message}"),
            Error::NvrtcUnavailable { reason } => write!(f, "NVRTC is not usable: {reason}"),
            Error::CudaHeaders { searched } => {
                write!(
                    f,
                    "cuda_fp16.h not found: the generated CUDA source needs the CUDA toolkit headers; \
                     set CUDA_HOME (or CUDA_PATH) to a CUDA installation. Searched:"
                )?;
                if searched.is_empty() {
                    write!(f, " (no folders)")?;
                }
                for dir in searched {
                    write!(f, "\n  {}", dir.display())?;
                }
                Ok(())
            }
            Error::Nvrtc {
                kernel,
                log,
                options,
                source,
                reproduce,
            } => write!(
                f,
                "kernel {kernel}: NVRTC compilation failed\noptions: {}\nsource: {}\nreproduce with: {reproduce}\nlog:\n{}",
                options.join(" "),
                source.display(),
                log.trim_end()
            ),
            Error::Cc {
                kernel,
                command,
                stderr,
                source,
            } => write!(
                f,
                "kernel {kernel}: C compiler failed\nsource: {}\nreproduce with: {command}\nstderr:\n{}",
                source.display(),
                stderr.trim_end()
            ),
            Error::Load {
                kernel,
                path,
                message,
            } => write!(
                f,
                "kernel {kernel}: cannot load {}: {message}",
                path.display()
            ),
            Error::Cache { path, source } => {
                write!(f, "kernel cache I/O error at {}: {source}", path.display())
            }
            Error::Thread { source } => write!(f, "cannot start a CPU worker thread: {source}"),
            Error::InvalidDevice { value } => write!(
                f,
                "invalid TILE_DEVICE value {value:?}: expected `cpu`, `cuda` or `cuda:N`"
            ),
            Error::TensorLen { shape, len } => {
                let numel: Option<usize> = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
                match numel {
                    Some(n) => write!(
                        f,
                        "tensor shape {shape:?} holds {n} elements but the data has {len}"
                    ),
                    None => write!(f, "tensor shape {shape:?} does not match data of length {len}"),
                }
            }
            Error::TensorTooLarge { shape } => {
                write!(f, "tensor shape {shape:?} is too large (size overflows usize)")
            }
            Error::TensorView { message } => write!(f, "{message}"),
            Error::NoTargetCode { kernel, target } => write!(
                f,
                "kernel {kernel} has no {target} code (it is compiled for another target only)"
            ),
            Error::GraphDevice { graph, stream } => write!(
                f,
                "graph stream device mismatch, expected {graph} (the graph's device), got {stream}"
            ),
            Error::Mismatch {
                kernel,
                buffer,
                message,
            } => write!(
                f,
                "kernel {kernel} output {buffer} does not match the reference: {message}"
            ),
            Error::Profile { kernel, message } => write!(f, "kernel {kernel}: profiler: {message}"),
            Error::Tune { kernel, message } => write!(f, "kernel {kernel}: autotune: {message}"),
            Error::Collective {
                op,
                rank,
                buffer,
                message,
            } => write!(f, "collective {op} on rank {rank}: {buffer}: {message}"),
            Error::Nccl {
                op,
                rank: Some(rank),
                message,
            } => write!(f, "NCCL {op} failed on rank {rank}: {message}"),
            Error::Nccl {
                op,
                rank: None,
                message,
            } => write!(f, "NCCL {op} failed: {message}"),
            Error::NcclUnavailable { reason } => write!(f, "NCCL is not usable: {reason}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Cache { source, .. } | Error::Thread { source } => Some(source),
            _ => None,
        }
    }
}

/// How a message names a parameter: written ones are outputs.
fn role(output: bool) -> &'static str {
    if output {
        "output"
    } else {
        "input"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_is_send_sync_static() {
        fn check<E: std::error::Error + Send + Sync + 'static>() {}
        check::<Error>();
    }

    #[test]
    fn tool_errors_show_how_to_reproduce() {
        let e = Error::Nvrtc {
            kernel: "k",
            log: "kernel.cu(3): error: identifier \"x\" is undefined\n".into(),
            options: vec!["--gpu-architecture=sm_90a".into(), "-std=c++17".into()],
            source: PathBuf::from("/c/kernel.cu"),
            reproduce: "nvcc -cubin -arch=sm_90a /c/kernel.cu".into(),
        };
        assert_eq!(
            e.to_string(),
            "kernel k: NVRTC compilation failed\noptions: --gpu-architecture=sm_90a -std=c++17\n\
             source: /c/kernel.cu\nreproduce with: nvcc -cubin -arch=sm_90a /c/kernel.cu\n\
             log:\nkernel.cu(3): error: identifier \"x\" is undefined"
        );
        let e = Error::Grid {
            kernel: "k",
            axis: 1,
            message: "extent -1 is negative".into(),
        };
        assert_eq!(e.to_string(), "kernel k: grid y: extent -1 is negative");
        let e = Error::cache("/x", std::io::Error::other("disk full"));
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(e.to_string(), "kernel cache I/O error at /x: disk full");
    }
}
