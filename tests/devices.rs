//! Several devices in one process: enumeration, kernels loaded and cached per
//! device, tensors that carry their device, copies between GPUs. Every test
//! runs on every visible GPU (ordinal 0 alone on a one-GPU machine) and checks
//! the host-only parts where there is none; without a GPU the GPU parts print
//! a line and return.

use tile::prelude::*;
use tile::testing::random_tensor;

#[tile::kernel(block_n = 256, threads = 128)]
pub fn d_axpy(a: Tensor<f32, (N,)>, b: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] * 2.0 + b[bx * block_n + i];
        }
    });
}

/// The visible GPUs, or `None` (with a line saying so) when there is none.
fn gpus(test: &str) -> Option<Vec<Device>> {
    let all = Device::all_cuda();
    if all.is_empty() {
        println!("{test}: skipped, no CUDA device");
        return None;
    }
    Some(all)
}

#[test]
fn enumeration_names_every_device() -> Result<(), Error> {
    let cpu = Device::Cpu.info()?;
    assert_eq!(
        (cpu.name.as_str(), cpu.compute_capability, cpu.arch),
        ("cpu", None, None)
    );
    let list = Device::cuda_devices()?;
    assert_eq!(list.len(), Device::cuda_device_count());
    assert_eq!(
        list.iter().map(|i| i.device).collect::<Vec<_>>(),
        Device::all_cuda()
    );
    if list.is_empty() {
        assert!(matches!(Device::Cuda(0).info(), Err(Error::NoCuda { .. })));
        println!("enumeration: no CUDA device");
        return Ok(());
    }
    for (n, info) in list.iter().enumerate() {
        println!("{info}");
        assert_eq!(info.device, Device::Cuda(n));
        assert!(!info.name.is_empty());
        let (major, _) = info
            .compute_capability
            .expect("a GPU has a compute capability");
        assert!(major >= 5, "{info}");
        assert!(info.arch.as_deref().is_some_and(|a| a.starts_with("sm_")));
        assert!(info.total_memory.is_some_and(|m| m > 0));
    }
    let count = list.len();
    assert!(matches!(
        Device::Cuda(count).info(),
        Err(Error::NoSuchDevice { ordinal, .. }) if ordinal == count
    ));
    Ok(())
}

#[test]
fn kernels_load_and_cache_per_device() -> Result<(), Error> {
    let Some(gpus) = gpus("kernels_load_and_cache_per_device") else {
        return Ok(());
    };
    let n = 4099;
    for (k, &d) in gpus.iter().enumerate() {
        let a = random_tensor::<f32>(&[n], 10 + k as u64, d)?;
        let b = random_tensor::<f32>(&[n], 20 + k as u64, d)?;
        assert_eq!((a.device(), b.device()), (d, d));
        let want: Vec<f32> = a
            .to_vec()?
            .iter()
            .zip(b.to_vec()?)
            .map(|(x, y)| x * 2.0 + y)
            .collect();
        // Cold on this device (loaded into its context), then warm; both right.
        for _ in 0..2 {
            let mut c = Tensor::full(&[n], f32::NAN, d)?;
            d_axpy(&a, &b, &mut c)?;
            assert_eq!(c.device(), d);
            assert_eq!(c.to_vec()?, want, "on {d}");
        }
        let origin = d_axpy::profiler().device(d).origin();
        println!("d_axpy on {d}: {origin:?}");
        assert!(origin.is_some(), "loaded for {d}");
        // A launcher's output lands on its inputs' device.
        let c2 = random_tensor::<f32>(&[n], 30, d)?;
        assert_eq!(c2.device(), d);
        // On an explicit stream of the device too.
        let s = d.new_stream()?;
        let mut c = Tensor::zeros(&[n], d)?;
        d_axpy::on(&s).launch(&a, &b, &mut c)?;
        s.synchronize()?;
        assert_eq!(c.to_vec()?, want);
    }
    // Devices a launch never ran on have nothing loaded.
    let unused = Device::Cuda(gpus.len());
    assert!(d_axpy::profiler().device(unused).origin().is_none());
    Ok(())
}

#[test]
fn a_launch_across_devices_is_a_device_mismatch() -> Result<(), Error> {
    let Some(gpus) = gpus("a_launch_across_devices_is_a_device_mismatch") else {
        return Ok(());
    };
    let n = 300;
    let last = *gpus.last().unwrap_or(&Device::Cuda(0));
    // The CPU beside a GPU, and (with two or more GPUs) two GPUs.
    let mut pairs = vec![
        (Device::Cpu, Device::Cuda(0)),
        (Device::Cuda(0), Device::Cpu),
    ];
    if last != Device::Cuda(0) {
        pairs.push((Device::Cuda(0), last));
    }
    for (first, other) in pairs {
        let a = random_tensor::<f32>(&[n], 1, first)?;
        let b = random_tensor::<f32>(&[n], 2, other)?;
        let mut c = Tensor::full(&[n], 7.0f32, first)?;
        let e = d_axpy(&a, &b, &mut c).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(&*format!(
                "kernel d_axpy input b device mismatch, expected {first}, got {other}"
            ))
        );
        assert_eq!(c.to_vec()?, vec![7.0; n], "nothing written");
        // A stream of another device than the tensors'.
        let b = random_tensor::<f32>(&[n], 2, first)?;
        let e = d_axpy::on(&other.default_stream()?)
            .launch(&a, &b, &mut c)
            .err();
        assert!(
            matches!(e, Some(Error::StreamDeviceMismatch { .. })),
            "{e:?}"
        );
    }
    Ok(())
}

#[test]
fn copies_between_devices_round_trip() -> Result<(), Error> {
    let Some(gpus) = gpus("copies_between_devices_round_trip") else {
        // The host path still copies.
        let t = random_tensor::<f32>(&[3, 5], 1, Device::Cpu)?;
        assert_eq!(t.to_device(Device::Cpu)?.to_vec()?, t.to_vec()?);
        return Ok(());
    };
    let n = 1 << 20;
    for &from in &gpus {
        for &to in &gpus {
            let peer = to.peer_access(from)?;
            println!("{from} -> {to}: peer access {peer}");
            if from == to {
                assert!(peer);
            }
            let t = random_tensor::<f32>(&[n], 5, from)?;
            let there = t.to_device(to)?;
            assert_eq!(there.device(), to);
            let back = there.to_device(from)?;
            assert_eq!(back.device(), from);
            assert_eq!(back.to_vec()?, t.to_vec()?, "{from} -> {to} -> {from}");
            // A view that starts inside its storage, and a strided one.
            let h = random_tensor::<f16>(&[64, 33], 6, from)?;
            let tail = h.reshape(&[64 * 33])?.slice(0, 7..64 * 33)?;
            assert_eq!(tail.to_device(to)?.to_vec()?, tail.to_vec()?);
            let tt = h.transpose(0, 1);
            let moved = tt.to_device(to)?;
            assert!(moved.is_contiguous());
            assert_eq!(moved.to_vec()?, tt.to_vec()?);
            // A kernel's output copied before the kernel is waited for: the copy is
            // ordered after it.
            let s = from.new_stream()?;
            let mut c = Tensor::zeros(&[n], from)?;
            d_axpy::on(&s).launch(&t, &t, &mut c)?;
            let copied = c.to_device(to)?;
            let want: Vec<f32> = t.to_vec()?.iter().map(|x| x * 3.0).collect();
            assert_eq!(copied.to_vec()?, want, "{from} -> {to} after a kernel");
            // And a kernel on the destination consumes it.
            let mut e = Tensor::zeros(&[n], to)?;
            d_axpy(&copied, &copied, &mut e)?;
            let want9: Vec<f32> = want.iter().map(|x| x * 3.0).collect();
            assert_eq!(e.to_vec()?, want9);
        }
        // Host round trips from this GPU.
        let t = random_tensor::<i32>(&[1000], 8, from)?;
        assert_eq!(
            t.to_device(Device::Cpu)?.to_device(from)?.to_vec()?,
            t.to_vec()?
        );
        assert!(!from.peer_access(Device::Cpu)?);
    }
    Ok(())
}
