//! `tile_example`: tile kernels compiled ahead of time (by `build.rs`) and exposed to
//! Python. Arguments are any objects with the DLPack protocol (`__dlpack__`,
//! `__dlpack_device__`): NumPy arrays run on the CPU backend, PyTorch CUDA tensors on
//! the GPU, without copies and on PyTorch's current stream (or the `stream` given).
//!
//! ```python
//! import numpy as np, tile_example
//! a = np.arange(1000, dtype=np.float32); b = np.ones(1000, np.float32)
//! c = np.empty_like(a)
//! tile_example.vecadd(a, b, c)        # c = a + b, in place, no copy
//! ```
//!
//! tile's argument checks apply (dtype, shape, strides, alignment, device, overlap); a
//! failure raises `tile_example.TileError` with tile's message.

use std::ptr::NonNull;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use tile::dlpack::DLManagedTensor;
use tile::prelude::*;

#[tile::kernel(block_n = 1024, threads = 128)]
pub fn vecadd(a: Tensor<f32, (N,)>, b: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
        }
    });
}

#[tile::kernel(block_n = 1024, threads = 128, one = 1)]
pub fn axpy(x: Tensor<f32, (N,)>, y: TensorMut<f32, (N,)>, alpha: Tensor<f32, (one,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            y[bx * block_n + i] = alpha[0] * x[bx * block_n + i] + y[bx * block_n + i];
        }
    });
}

pyo3::create_exception!(
    tile_example,
    TileError,
    PyException,
    "A tile error: an argument check, a DLPack import or a launch failed."
);

fn tile_err(e: tile::Error) -> PyErr {
    TileError::new_err(e.to_string())
}

/// `__dlpack_device__()` as a tile device.
fn device_of(obj: &Bound<'_, PyAny>) -> PyResult<Device> {
    let (kind, id): (i32, i32) = obj.call_method0("__dlpack_device__")?.extract()?;
    match kind {
        tile::dlpack::K_DL_CPU => Ok(Device::Cpu),
        tile::dlpack::K_DL_CUDA if id >= 0 => Ok(Device::Cuda(id as usize)),
        _ => Err(TileError::new_err(format!(
            "DLPack device type {kind} (id {id}) is not supported (CPU = 1 and CUDA = 2 are)"
        ))),
    }
}

/// The raw stream to launch on for CUDA device `ordinal`: `stream` if given, else
/// PyTorch's current stream when torch is loaded, else the legacy default stream (0);
/// and whether it is torch's current stream.
fn cuda_stream_handle(
    py: Python<'_>,
    ordinal: usize,
    stream: Option<usize>,
) -> PyResult<(usize, bool)> {
    if let Some(s) = stream {
        return Ok((s, false));
    }
    let loaded = py.import("sys")?.getattr("modules")?.contains("torch")?;
    if !loaded {
        return Ok((0, false));
    }
    let torch = py.import("torch")?;
    let handle = torch
        .getattr("cuda")?
        .call_method1("current_stream", (ordinal,))?
        .getattr("cuda_stream")?
        .extract()?;
    Ok((handle, true))
}

/// A torch tensor's DLPack capsule without the stream handshake, for a launch on
/// torch's current stream of the tensor's device. There `__dlpack__(stream=h)` only
/// wraps `h` in a stream object, finds it equal to the current one and synchronizes
/// nothing, at some 12 µs per tensor (`tests/overhead_torch.py`);
/// `torch.utils.dlpack.to_dlpack` returns the same capsule without that. `None` for
/// objects that are not torch tensors.
fn torch_capsule<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let torch = py.import("torch")?;
    if !obj.is_instance(&torch.getattr("Tensor")?)? {
        return Ok(None);
    }
    let dlpack = py.import("torch.utils.dlpack")?;
    Ok(Some(dlpack.call_method1("to_dlpack", (obj,))?))
}

/// Imports `obj` through `__dlpack__` as a tile tensor on `stream` (no copy);
/// `torch_current`: `handle` is torch's current stream on `stream`'s device.
fn import(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    stream: &Stream,
    handle: usize,
    torch_current: bool,
) -> PyResult<tile::Tensor<f32>> {
    // A producer on another device than the stream's is asked for its capsule without
    // a stream (torch refuses a stream for a CPU tensor): tile's import then refuses the
    // pair with its own error, naming both devices.
    let other_device = device_of(obj)? != stream.device();
    let fast = match stream {
        Stream::Cuda(_) if torch_current && !other_device => torch_capsule(py, obj)?,
        _ => None,
    };
    let capsule = match (fast, stream) {
        (Some(capsule), _) => capsule,
        (None, Stream::Cpu) => obj.call_method0("__dlpack__")?,
        (None, Stream::Cuda(_)) if other_device => obj.call_method0("__dlpack__")?,
        (None, Stream::Cuda(_)) => {
            // DLPack's stream argument: 1 names the legacy default stream (0 is not
            // allowed); the producer orders its pending work before the stream given.
            let kw = pyo3::types::PyDict::new(py);
            kw.set_item("stream", if handle == 0 { 1 } else { handle })?;
            obj.call_method("__dlpack__", (), Some(&kw))?
        }
    };
    // SAFETY: `capsule` is a live Python object; a DLPack capsule is named "dltensor"
    // until a consumer takes it and renames it "used_dltensor" (so its destructor no
    // longer calls the deleter: ownership passes to tile, which always calls it).
    let managed = unsafe {
        let raw = capsule.as_ptr();
        let p = pyo3::ffi::PyCapsule_GetPointer(raw, c"dltensor".as_ptr());
        if p.is_null() {
            return Err(PyErr::fetch(py));
        }
        if pyo3::ffi::PyCapsule_SetName(raw, c"used_dltensor".as_ptr()) != 0 {
            return Err(PyErr::fetch(py));
        }
        NonNull::new_unchecked(p.cast::<DLManagedTensor>())
    };
    // SAFETY: a DLPack producer's tensor, valid until its deleter runs; its memory is
    // ready on `stream` (CPU memory, or ordered by `__dlpack__(stream=..)`).
    unsafe { tile::Tensor::<f32>::from_dlpack(managed, stream) }.map_err(tile_err)
}

/// Imports every argument; an argument that is exactly an earlier one (same memory and
/// layout) becomes the same tile tensor, so a kernel may update it in place.
fn import_all(
    py: Python<'_>,
    objs: &[&Bound<'_, PyAny>],
    stream: Option<usize>,
) -> PyResult<(Stream, Vec<tile::Tensor<f32>>)> {
    let device = device_of(objs[0])?;
    let (stream, handle, torch_current) = match device {
        Device::Cpu => (Stream::Cpu, 0, false),
        Device::Cuda(n) => {
            let (h, torch_current) = cuda_stream_handle(py, n, stream)?;
            // SAFETY: the caller's (or torch's) stream on this device, alive for the call.
            let s = unsafe { Stream::from_raw_cuda(device, h) }.map_err(tile_err)?;
            (s, h, torch_current)
        }
    };
    let mut out: Vec<tile::Tensor<f32>> = Vec::with_capacity(objs.len());
    for obj in objs {
        let t = import(py, obj, &stream, handle, torch_current)?;
        let same = out.iter().find(|u| {
            u.data_ptr() == t.data_ptr() && u.shape() == t.shape() && u.strides() == t.strides()
        });
        out.push(match same {
            Some(u) => u.clone(),
            None => t,
        });
    }
    Ok((stream, out))
}

/// `c = a + b` (float32 vectors of one length), in place in `c`.
#[pyfunction]
#[pyo3(name = "vecadd", signature = (a, b, c, *, stream = None))]
fn vecadd_py(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    c: &Bound<'_, PyAny>,
    stream: Option<usize>,
) -> PyResult<()> {
    let (s, mut t) = import_all(py, &[a, b, c], stream)?;
    let (a, rest) = t.split_at_mut(1);
    let (b, c) = rest.split_at_mut(1);
    vecadd::on(&s)
        .launch(&a[0], &b[0], &mut c[0])
        .map_err(tile_err)
}

/// `y += alpha * x` (float32 vectors; `alpha` a one-element array).
#[pyfunction]
#[pyo3(name = "axpy", signature = (x, y, alpha, *, stream = None))]
fn axpy_py(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    y: &Bound<'_, PyAny>,
    alpha: &Bound<'_, PyAny>,
    stream: Option<usize>,
) -> PyResult<()> {
    let (s, mut t) = import_all(py, &[x, y, alpha], stream)?;
    let (x, rest) = t.split_at_mut(1);
    let (y, alpha) = rest.split_at_mut(1);
    axpy::on(&s)
        .launch(&x[0], &mut y[0], &alpha[0])
        .map_err(tile_err)
}

/// The generated source of a kernel of this module for `target` ("cpu" or "cuda").
#[pyfunction]
fn source(kernel: &str, target: &str) -> PyResult<String> {
    let target = match target {
        "cpu" => Target::Cpu,
        "cuda" => Target::Cuda,
        other => return Err(TileError::new_err(format!("unknown target {other:?}"))),
    };
    match kernel {
        "vecadd" => Ok(vecadd::source(target).to_string()),
        "axpy" => Ok(axpy::source(target).to_string()),
        other => Err(TileError::new_err(format!("unknown kernel {other:?}"))),
    }
}

#[pymodule]
fn tile_example(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TileError", m.py().get_type::<TileError>())?;
    m.add_function(wrap_pyfunction!(vecadd_py, m)?)?;
    m.add_function(wrap_pyfunction!(axpy_py, m)?)?;
    m.add_function(wrap_pyfunction!(source, m)?)?;
    Ok(())
}
