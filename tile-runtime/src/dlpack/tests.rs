use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::*;

#[test]
fn layout_on_64_bit_targets() {
    assert_eq!(size_of::<DLDevice>(), 8);
    assert_eq!(size_of::<DLDataType>(), 4);
    assert_eq!(size_of::<DLPackVersion>(), 8);
    if size_of::<usize>() != 8 {
        return;
    }
    assert_eq!(offset_of!(DLTensor, data), 0);
    assert_eq!(offset_of!(DLTensor, device), 8);
    assert_eq!(offset_of!(DLTensor, ndim), 16);
    assert_eq!(offset_of!(DLTensor, dtype), 20);
    assert_eq!(offset_of!(DLTensor, shape), 24);
    assert_eq!(offset_of!(DLTensor, strides), 32);
    assert_eq!(offset_of!(DLTensor, byte_offset), 40);
    assert_eq!(size_of::<DLTensor>(), 48);
    assert_eq!(offset_of!(DLManagedTensor, manager_ctx), 48);
    assert_eq!(offset_of!(DLManagedTensor, deleter), 56);
    assert_eq!(size_of::<DLManagedTensor>(), 64);
    assert_eq!(offset_of!(DLManagedTensorVersioned, manager_ctx), 8);
    assert_eq!(offset_of!(DLManagedTensorVersioned, deleter), 16);
    assert_eq!(offset_of!(DLManagedTensorVersioned, flags), 24);
    assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
    assert_eq!(size_of::<DLManagedTensorVersioned>(), 80);
}

/// The DLPack structs declared in C as the specification declares them (`dlpack.h`,
/// v0.8 legacy and v1 versioned forms), measured by the system C compiler.
const C_DECLS: &str = r#"
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef enum { kDLCPU = 1, kDLCUDA = 2 } DLDeviceType;
typedef struct { DLDeviceType device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void *data; DLDevice device; int32_t ndim; DLDataType dtype;
  int64_t *shape; int64_t *strides; uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor; void *manager_ctx; void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version; void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags; DLTensor dl_tensor;
} DLManagedTensorVersioned;
#define F(T, f) printf(#T "." #f " %zu\n", offsetof(T, f))
#define S(T) printf(#T " %zu\n", sizeof(T))
int main(void) {
  S(DLDevice); S(DLDataType); S(DLPackVersion); S(DLTensor);
  S(DLManagedTensor); S(DLManagedTensorVersioned);
  F(DLDevice, device_id); F(DLDataType, bits); F(DLDataType, lanes);
  F(DLTensor, device); F(DLTensor, ndim); F(DLTensor, dtype); F(DLTensor, shape);
  F(DLTensor, strides); F(DLTensor, byte_offset);
  F(DLManagedTensor, manager_ctx); F(DLManagedTensor, deleter);
  F(DLManagedTensorVersioned, manager_ctx); F(DLManagedTensorVersioned, deleter);
  F(DLManagedTensorVersioned, flags); F(DLManagedTensorVersioned, dl_tensor);
  return 0;
}
"#;

#[test]
fn layout_matches_the_c_declarations() {
    let dir = std::env::temp_dir().join(format!("tile-dlpack-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&src, C_DECLS).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = std::process::Command::new(&cc)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status();
    if !matches!(built, Ok(s) if s.success()) {
        eprintln!("skipped: no working C compiler ({cc})");
        return;
    }
    let out = std::process::Command::new(&exe).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8(out.stdout).unwrap();
    let expected = [
        ("DLDevice", size_of::<DLDevice>()),
        ("DLDataType", size_of::<DLDataType>()),
        ("DLPackVersion", size_of::<DLPackVersion>()),
        ("DLTensor", size_of::<DLTensor>()),
        ("DLManagedTensor", size_of::<DLManagedTensor>()),
        (
            "DLManagedTensorVersioned",
            size_of::<DLManagedTensorVersioned>(),
        ),
        ("DLDevice.device_id", offset_of!(DLDevice, device_id)),
        ("DLDataType.bits", offset_of!(DLDataType, bits)),
        ("DLDataType.lanes", offset_of!(DLDataType, lanes)),
        ("DLTensor.device", offset_of!(DLTensor, device)),
        ("DLTensor.ndim", offset_of!(DLTensor, ndim)),
        ("DLTensor.dtype", offset_of!(DLTensor, dtype)),
        ("DLTensor.shape", offset_of!(DLTensor, shape)),
        ("DLTensor.strides", offset_of!(DLTensor, strides)),
        ("DLTensor.byte_offset", offset_of!(DLTensor, byte_offset)),
        (
            "DLManagedTensor.manager_ctx",
            offset_of!(DLManagedTensor, manager_ctx),
        ),
        (
            "DLManagedTensor.deleter",
            offset_of!(DLManagedTensor, deleter),
        ),
        (
            "DLManagedTensorVersioned.manager_ctx",
            offset_of!(DLManagedTensorVersioned, manager_ctx),
        ),
        (
            "DLManagedTensorVersioned.deleter",
            offset_of!(DLManagedTensorVersioned, deleter),
        ),
        (
            "DLManagedTensorVersioned.flags",
            offset_of!(DLManagedTensorVersioned, flags),
        ),
        (
            "DLManagedTensorVersioned.dl_tensor",
            offset_of!(DLManagedTensorVersioned, dl_tensor),
        ),
    ];
    let got: Vec<(String, usize)> = text
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    let want: Vec<(String, usize)> = expected.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    assert_eq!(got, want);
}

#[test]
fn dtypes_map_one_to_one() {
    for d in DType::ALL {
        assert_eq!(from_dl(to_dl(d)), Some(d), "{d}");
    }
    let dt = |code, bits| DLDataType {
        code,
        bits,
        lanes: 1,
    };
    assert_eq!(from_dl(dt(code::BOOL, 8)), Some(DType::Bool));
    assert_eq!(from_dl(dt(code::UINT, 8)), Some(DType::U8));
    assert_eq!(from_dl(dt(code::FLOAT, 16)), Some(DType::F16));
    assert_eq!(from_dl(dt(code::BFLOAT, 16)), Some(DType::BF16));
    assert_eq!(from_dl(dt(code::FLOAT8_E4M3FN, 8)), Some(DType::F8E4M3));
    assert_eq!(from_dl(dt(code::FLOAT8_E5M2, 8)), Some(DType::F8E5M2));
    // No relaxation between f8 variants, int and float, or widths.
    for refused in [
        dt(code::FLOAT8_E4M3, 8),
        dt(code::FLOAT8_E4M3FNUZ, 8),
        dt(code::FLOAT8_E4M3B11FNUZ, 8),
        dt(code::FLOAT8_E5M2FNUZ, 8),
        dt(code::FLOAT8_E3M4, 8),
        dt(code::BOOL, 1),
        dt(code::FLOAT, 8),
        dt(code::BFLOAT, 32),
        dt(code::INT, 128),
        dt(3, 64),
        dt(5, 64),
        DLDataType {
            code: code::FLOAT,
            bits: 32,
            lanes: 4,
        },
    ] {
        assert_eq!(from_dl(refused), None, "{refused:?}");
    }
    assert_ne!(to_dl(DType::I32), to_dl(DType::U32));
    assert_ne!(to_dl(DType::F16), to_dl(DType::BF16));
    assert_ne!(to_dl(DType::F8E4M3), to_dl(DType::F8E5M2));
}

#[test]
fn export_describes_the_view_and_keeps_the_storage() -> Result<()> {
    let t = Tensor::from_slice(
        &(0..12).map(|i| i as f32).collect::<Vec<_>>(),
        &[3, 4],
        Device::Cpu,
    )?;
    let view = t.slice(0, 1..3)?.transpose(0, 1);
    let m = view.to_dlpack(&Stream::Cpu)?;
    assert_eq!(Arc::strong_count(t.storage()), 3);
    drop(view);
    drop(t);
    // SAFETY: a live export; read as a consumer would.
    unsafe {
        let dl = &(*m.as_ptr()).dl_tensor;
        assert_eq!(
            dl.device,
            DLDevice {
                device_type: K_DL_CPU,
                device_id: 0
            }
        );
        assert_eq!(dl.dtype, to_dl(DType::F32));
        assert_eq!(dl.ndim, 2);
        assert_eq!(std::slice::from_raw_parts(dl.shape, 2), &[4, 2]);
        assert_eq!(std::slice::from_raw_parts(dl.strides, 2), &[1, 4]);
        assert_eq!(dl.byte_offset, 16);
        let first = (dl.data as *const u8)
            .add(dl.byte_offset as usize)
            .cast::<f32>();
        // Element [j, i] of the transposed rows 1..3 is row 1 + i, column j.
        assert_eq!(*first, 4.0);
        assert_eq!(*first.add(4 + 3), 11.0);
        let deleter = (*m.as_ptr()).deleter.unwrap();
        deleter(m.as_ptr());
    }
    Ok(())
}

#[test]
fn own_exports_come_back_as_the_same_tensor() -> Result<()> {
    let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[4], Device::Cpu)?;
    let m = t.to_dlpack(&Stream::Cpu)?;
    // SAFETY: our own export, consumed once.
    let mut back = unsafe { Tensor::<i32>::from_dlpack(m, &Stream::Cpu)? };
    assert!(Arc::ptr_eq(back.storage(), t.storage()));
    back.copy_from_slice(&[5, 6, 7, 8])?;
    assert_eq!(t.to_vec()?, vec![5, 6, 7, 8]);
    let m = t.to_dlpack_versioned(&Stream::Cpu)?;
    // SAFETY: as above.
    let back = unsafe { Tensor::<i32>::from_dlpack_versioned(m, &Stream::Cpu)? };
    assert!(Arc::ptr_eq(back.storage(), t.storage()));
    // Asked back as another dtype: refused, and released.
    let m = t.to_dlpack(&Stream::Cpu)?;
    // SAFETY: as above.
    let e = unsafe { Tensor::<u32>::from_dlpack(m, &Stream::Cpu) }.unwrap_err();
    assert!(e.to_string().contains("another dtype than uint32"), "{e}");
    drop(back);
    assert_eq!(Arc::strong_count(t.storage()), 2);
    Ok(())
}

/// A producer outside tile: owns a host buffer and its shape/strides, counts deleter
/// calls.
#[repr(C)]
struct Foreign {
    managed: DLManagedTensor,
    data: Vec<f32>,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
}

static DELETED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn delete_foreign(m: *mut DLManagedTensor) {
    DELETED.fetch_add(1, Ordering::SeqCst);
    // SAFETY: made by `foreign` with `Box::into_raw`.
    drop(unsafe { Box::from_raw(m.cast::<Foreign>()) });
}

fn foreign(
    data: Vec<f32>,
    shape: &[i64],
    strides: Option<&[i64]>,
    offset: u64,
    dtype: DLDataType,
) -> NonNull<DLManagedTensor> {
    let mut f = Box::new(Foreign {
        managed: DLManagedTensor {
            dl_tensor: DLTensor {
                data: std::ptr::null_mut(),
                device: DLDevice {
                    device_type: K_DL_CPU,
                    device_id: 0,
                },
                ndim: shape.len() as i32,
                dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: offset,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_foreign),
        },
        data,
        shape: shape.to_vec(),
        strides: strides.map(<[i64]>::to_vec),
    });
    f.managed.dl_tensor.data = f.data.as_mut_ptr().cast();
    f.managed.dl_tensor.shape = f.shape.as_mut_ptr();
    if let Some(s) = &mut f.strides {
        f.managed.dl_tensor.strides = s.as_mut_ptr();
    }
    NonNull::from(&mut Box::leak(f).managed)
}

#[test]
fn foreign_imports_are_zero_copy_and_released_once() -> Result<()> {
    // DELETED is shared by the import tests: they run in this one test, in order.
    let f32_dl = to_dl(DType::F32);
    let data: Vec<f32> = (0..8).map(|i| i as f32).collect();
    let m = foreign(data, &[2, 3], Some(&[4, 1]), 4, f32_dl);
    // SAFETY: a valid foreign tensor on the host.
    let mut t = unsafe { Tensor::<f32>::from_dlpack(m, &Stream::Cpu)? };
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(t.strides(), &[4, 1]);
    assert_eq!(t.to_vec()?, vec![1.0, 2.0, 3.0, 5.0, 6.0, 7.0]);
    t.copy_from_slice(&[0.0; 6])?;
    // SAFETY: the producer's buffer, still alive (the tensor holds it).
    let raw = unsafe { std::slice::from_raw_parts((t.data_ptr() - 4) as *const f32, 8) };
    assert_eq!(raw, &[0.0, 0.0, 0.0, 0.0, 4.0, 0.0, 0.0, 0.0]);
    let clone = t.clone();
    drop(t);
    assert_eq!(DELETED.load(Ordering::SeqCst), 0);
    drop(clone);
    assert_eq!(DELETED.load(Ordering::SeqCst), 1);

    // Null strides mean row-major.
    let m = foreign(vec![1.0; 6], &[2, 3], None, 0, f32_dl);
    // SAFETY: as above.
    let t = unsafe { Tensor::<f32>::from_dlpack(m, &Stream::Cpu)? };
    assert_eq!(t.strides(), &[3, 1]);
    drop(t);
    assert_eq!(DELETED.load(Ordering::SeqCst), 2);

    // Refusals release the producer's tensor too.
    let refusals: [(NonNull<DLManagedTensor>, &str); 4] = [
        (
            foreign(vec![0.0; 4], &[4], None, 0, to_dl(DType::I32)),
            "DLPack dtype mismatch, expected float32, got int32",
        ),
        (
            foreign(
                vec![0.0; 4],
                &[4],
                None,
                0,
                DLDataType {
                    code: code::FLOAT,
                    bits: 32,
                    lanes: 2,
                },
            ),
            "DLPack dtype mismatch, expected float32, got code 2, 32 bits, 2 lanes",
        ),
        (
            foreign(vec![0.0; 4], &[2, 2], Some(&[-2, 1]), 8, f32_dl),
            "negative strides",
        ),
        (
            foreign(vec![0.0; 4], &[-1], None, 0, f32_dl),
            "negative extent",
        ),
    ];
    for (i, (m, msg)) in refusals.into_iter().enumerate() {
        // SAFETY: as above.
        let e = unsafe { Tensor::<f32>::from_dlpack(m, &Stream::Cpu) }.unwrap_err();
        assert!(e.to_string().contains(msg), "{e}");
        assert_eq!(DELETED.load(Ordering::SeqCst), 3 + i);
    }

    // A CUDA tensor handed over with the host stream is refused.
    let m = foreign(vec![0.0; 4], &[4], None, 0, f32_dl);
    // SAFETY: the device field is rewritten before import; the memory is never read.
    let e = unsafe {
        (*m.as_ptr()).dl_tensor.device = DLDevice {
            device_type: K_DL_CUDA,
            device_id: 0,
        };
        Tensor::<f32>::from_dlpack(m, &Stream::Cpu)
    }
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "DLPack tensor is on cuda:0, the stream given on cpu"
    );
    assert_eq!(DELETED.load(Ordering::SeqCst), 7);
    Ok(())
}

static DELETED_V: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn delete_versioned(m: *mut DLManagedTensorVersioned) {
    DELETED_V.fetch_add(1, Ordering::SeqCst);
    // SAFETY: made by `Box::into_raw` below, with the data leaked beside it.
    drop(unsafe { Box::from_raw(m) });
}

#[test]
fn versioned_imports_check_version_and_read_only() -> Result<()> {
    let data: &'static mut [u8] = Box::leak(vec![7u8; 4].into_boxed_slice());
    let shape: &'static mut [i64] = Box::leak(vec![4i64].into_boxed_slice());
    let make = |major, flags| {
        NonNull::from(Box::leak(Box::new(DLManagedTensorVersioned {
            version: DLPackVersion { major, minor: 0 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_versioned),
            flags,
            dl_tensor: DLTensor {
                data: data.as_ptr() as *mut c_void,
                device: DLDevice {
                    device_type: K_DL_CPU,
                    device_id: 0,
                },
                ndim: 1,
                dtype: to_dl(DType::U8),
                shape: shape.as_ptr() as *mut i64,
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        })))
    };
    // SAFETY: valid versioned tensors over leaked host memory.
    unsafe {
        let t = Tensor::<u8>::from_dlpack_versioned(make(1, 0), &Stream::Cpu)?;
        assert_eq!(t.to_vec()?, vec![7; 4]);
        drop(t);
        assert_eq!(DELETED_V.load(Ordering::SeqCst), 1);
        let e =
            Tensor::<u8>::from_dlpack_versioned(make(1, FLAG_READ_ONLY), &Stream::Cpu).unwrap_err();
        assert_eq!(
            e.to_string(),
            "DLPack tensor is read-only; tile imports tensors as writable"
        );
        let e = Tensor::<u8>::from_dlpack_versioned(make(2, 0), &Stream::Cpu).unwrap_err();
        assert_eq!(
            e.to_string(),
            "DLPack tensor of version 2.0 (tile reads major version 1)"
        );
    }
    assert_eq!(DELETED_V.load(Ordering::SeqCst), 3);
    Ok(())
}

#[test]
fn f8_tensors_export_as_float8_and_come_back() -> Result<()> {
    use crate::f8::{f8e4m3, f8e5m2};
    let vals = [1.0, -0.5, 448.0, 0.001953125, -3.0].map(f8e4m3::from_f64);
    let t = Tensor::from_slice(&vals, &[5], Device::Cpu)?;
    let m = t.to_dlpack(&Stream::Cpu)?;
    // SAFETY: a live export, read as a consumer would (PyTorch's float8_e4m3fn).
    unsafe {
        let dl = &(*m.as_ptr()).dl_tensor;
        assert_eq!(
            (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes),
            (code::FLOAT8_E4M3FN, 8, 1)
        );
        let bytes = std::slice::from_raw_parts(dl.data as *const u8, 5);
        assert_eq!(bytes, &[0x38, 0xB0, 0x7E, 0x01, 0xC4]);
    }
    // SAFETY: our own export, consumed once.
    let back = unsafe { Tensor::<f8e4m3>::from_dlpack(m, &Stream::Cpu)? };
    assert!(Arc::ptr_eq(back.storage(), t.storage()));
    assert_eq!(back.to_vec()?, vals.to_vec());
    // The two f8 formats are distinct dtypes: one is not taken for the other.
    let m = t.to_dlpack_versioned(&Stream::Cpu)?;
    // SAFETY: as above.
    let e = unsafe { Tensor::<f8e5m2>::from_dlpack_versioned(m, &Stream::Cpu) }.unwrap_err();
    assert!(
        e.to_string().contains("another dtype than float8_e5m2"),
        "{e}"
    );

    let w = Tensor::from_slice(&[f8e5m2::MAX, f8e5m2::NEG_ONE], &[2], Device::Cpu)?;
    let m = w.to_dlpack_versioned(&Stream::Cpu)?;
    // SAFETY: as above.
    let back = unsafe { Tensor::<f8e5m2>::from_dlpack_versioned(m, &Stream::Cpu)? };
    assert_eq!(back.to_vec()?, vec![f8e5m2::MAX, f8e5m2::NEG_ONE]);
    Ok(())
}
