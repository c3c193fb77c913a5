//! `tile::dist`: communicators and collectives. The host communicator (one
//! rank) and every argument check run everywhere; the NCCL parts run on every
//! visible GPU, as one rank each and all together (two or more ranks where
//! there are two or more GPUs), and print a line and return where there is no
//! GPU or no NCCL library.

use tile::dist::{self, Comm, ReduceOp, UniqueId};
use tile::prelude::*;
use tile::testing::random_tensor;

#[allow(dead_code)]
#[path = "../examples/tensor_parallel_mlp.rs"]
mod tensor_parallel_mlp;

#[tile::kernel(block_n = 256, threads = 128)]
pub fn dist_scale(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] * 3.0;
        }
    });
}

const OPS: [ReduceOp; 5] = [
    ReduceOp::Sum,
    ReduceOp::Prod,
    ReduceOp::Max,
    ReduceOp::Min,
    ReduceOp::Avg,
];

/// The visible GPUs when NCCL can be used with them, else `None` with a line
/// saying why.
fn nccl_gpus(test: &str) -> Option<Vec<Device>> {
    let gpus = Device::all_cuda();
    if gpus.is_empty() {
        println!("{test}: skipped, no CUDA device");
        return None;
    }
    match dist::nccl_version() {
        Ok((a, b, c)) => {
            println!("{test}: NCCL {a}.{b}.{c}, {} GPU(s)", gpus.len());
            Some(gpus)
        }
        Err(e) => {
            println!("{test}: skipped, {e}");
            None
        }
    }
}

fn values<T: Element>(t: &Tensor<T>) -> Vec<f64> {
    t.to_vec()
        .map(|v| v.iter().map(|x| x.to_f64()).collect())
        .unwrap_or_default()
}

/// With one rank every reduction of random data is the data, in every dtype.
fn one_rank_identity<T: Element>(comm: &Comm, seed: u64) -> Result<(), Error> {
    let d = comm.device();
    let n = 1031;
    let x = random_tensor::<T>(&[n], seed, d)?;
    for op in OPS {
        let mut y = Tensor::<T>::zeros(&[n], d)?;
        comm.all_reduce(&x, &mut y, op)?;
        assert_eq!(values(&y), values(&x), "{:?} {op:?} on {d}", T::DTYPE);
    }
    let mut z = x.to_device(d)?;
    comm.all_reduce_in_place(&mut z, ReduceOp::Sum)?;
    assert_eq!(values(&z), values(&x));
    Ok(())
}

/// All four collectives with one rank, checked values, on `comm`'s device.
fn one_rank_collectives(comm: &Comm) -> Result<(), Error> {
    assert_eq!((comm.rank(), comm.world_size()), (0, 1));
    one_rank_identity::<f32>(comm, 1)?;
    one_rank_identity::<f64>(comm, 2)?;
    one_rank_identity::<f16>(comm, 3)?;
    one_rank_identity::<bf16>(comm, 4)?;
    one_rank_identity::<i8>(comm, 5)?;
    one_rank_identity::<u8>(comm, 6)?;
    one_rank_identity::<i32>(comm, 7)?;
    one_rank_identity::<u32>(comm, 8)?;
    one_rank_identity::<i64>(comm, 9)?;
    one_rank_identity::<u64>(comm, 10)?;
    let d = comm.device();
    let x = random_tensor::<f32>(&[6, 50], 11, d)?;
    let mut g = Tensor::<f32>::zeros(&[6, 50], d)?;
    comm.all_gather(&x, &mut g)?;
    assert_eq!(g.to_vec()?, x.to_vec()?);
    let mut rs = Tensor::<f32>::zeros(&[300], d)?;
    comm.reduce_scatter(&x, &mut rs, ReduceOp::Max)?;
    assert_eq!(rs.to_vec()?, x.to_vec()?);
    let mut b = x.to_device(d)?;
    comm.broadcast(&mut b, 0)?;
    assert_eq!(b.to_vec()?, x.to_vec()?);
    // On an explicit stream, read back after it.
    let s = d.new_stream()?;
    let mut y = Tensor::<f32>::zeros(&[6, 50], d)?;
    comm.on(&s).all_reduce(&x, &mut y, ReduceOp::Avg)?;
    s.synchronize()?;
    assert_eq!(y.to_vec()?, x.to_vec()?);
    // NCCL's in-place layouts: the same buffer, this rank's block.
    let whole = random_tensor::<f32>(&[64], 12, d)?;
    let want = whole.to_vec()?;
    let mut recv = whole.clone();
    comm.all_gather(&whole, &mut recv)?;
    assert_eq!(recv.to_vec()?, want);
    Ok(())
}

#[test]
fn host_communicator_has_one_rank() -> Result<(), Error> {
    let comms = Comm::for_devices(&[Device::Cpu])?;
    assert_eq!(comms.len(), 1);
    assert_eq!(comms[0].device(), Device::Cpu);
    one_rank_collectives(&comms[0])?;
    // Grouping works the same with and without NCCL.
    let mut t = Tensor::full(&[4], 2.5f32, Device::Cpu)?;
    dist::group(|| comms[0].all_reduce_in_place(&mut t, ReduceOp::Sum))?;
    assert_eq!(t.to_vec()?, vec![2.5; 4]);
    let one = Comm::from_rank(&UniqueId::from_bytes(&[0; 128])?, 0, 1, Device::Cpu)?;
    assert_eq!((one.rank(), one.world_size()), (0, 1));
    Ok(())
}

fn message(r: Result<(), Error>) -> String {
    match r {
        Ok(()) => "no error".into(),
        Err(e) => {
            assert!(
                matches!(e, Error::Collective { .. }),
                "expected a Collective error, got {e:?}"
            );
            e.to_string()
        }
    }
}

/// Every refused call: the error names the operation, the rank and the
/// buffer, and nothing is written.
fn argument_errors(comm: &Comm) -> Result<(), Error> {
    let d = comm.device();
    let x = random_tensor::<f32>(&[4], 1, d)?;
    let mut short = Tensor::full(&[5], 9.0f32, d)?;
    assert_eq!(
        message(comm.all_reduce(&x, &mut short, ReduceOp::Sum)),
        "collective all_reduce on rank 0: send: send and recv must hold as many elements \
         (send [4], recv [5], world size 1)"
    );
    assert_eq!(
        message(comm.all_gather(&x, &mut short)),
        "collective all_gather on rank 0: recv: recv must hold world size × send's elements \
         (send [4], recv [5], world size 1)"
    );
    assert_eq!(
        message(comm.reduce_scatter(&x, &mut short, ReduceOp::Sum)),
        "collective reduce_scatter on rank 0: send: send must hold world size × recv's \
         elements (send [4], recv [5], world size 1)"
    );
    assert_eq!(short.to_vec()?, vec![9.0; 5], "nothing written");
    assert_eq!(
        message(comm.broadcast(&mut short, 1)),
        "collective broadcast on rank 0: root: root 1 of a world of 1"
    );
    let mut flags = Tensor::<bool>::zeros(&[8], d)?;
    assert_eq!(
        message(comm.all_reduce_in_place(&mut flags, ReduceOp::Max)),
        "collective all_reduce on rank 0: buf: dtype bool has no NCCL type (NCCL takes int8, \
         uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64, float8_e4m3, \
         float8_e5m2)"
    );
    let mut shorts = Tensor::<i16>::zeros(&[8], d)?;
    assert!(message(comm.broadcast(&mut shorts, 0)).contains("dtype int16 has no NCCL type"));
    let mut words = Tensor::<u16>::zeros(&[8], d)?;
    assert!(message(comm.all_reduce_in_place(&mut words, ReduceOp::Sum)).contains("dtype uint16"));
    // Not contiguous.
    let m = random_tensor::<f32>(&[3, 4], 2, d)?;
    let mut out = Tensor::<f32>::zeros(&[4, 3], d)?;
    assert_eq!(
        message(comm.all_reduce(&m.transpose(0, 1), &mut out, ReduceOp::Sum)),
        "collective all_reduce on rank 0: send: not contiguous (shape [4, 3]); collectives take \
         row-major tensors (`.contiguous()` makes a copy)"
    );
    // Overlapping views of one storage that are not an in-place layout.
    let base = Tensor::full(&[8], 1.0f32, d)?;
    let send = base.slice(0, 0..4)?;
    let mut recv = base.slice(0, 2..6)?;
    assert!(message(comm.all_reduce(&send, &mut recv, ReduceOp::Sum))
        .starts_with("collective all_reduce on rank 0: recv: overlaps send in memory"));
    assert_eq!(base.to_vec()?, vec![1.0; 8]);
    // Another device's tensors and streams.
    let other = if d.is_cpu() {
        Device::all_cuda().first().copied()
    } else {
        Some(Device::Cpu)
    };
    if let Some(o) = other {
        let y = random_tensor::<f32>(&[4], 3, o)?;
        let mut z = Tensor::full(&[4], 9.0f32, d)?;
        assert_eq!(
            message(comm.all_reduce(&y, &mut z, ReduceOp::Sum)),
            format!(
                "collective all_reduce on rank 0: send: device mismatch, expected {d} (the \
                 communicator's device), got {o}"
            )
        );
        assert_eq!(z.to_vec()?, vec![9.0; 4]);
        let s = o.default_stream()?;
        assert_eq!(
            message(comm.on(&s).all_reduce_in_place(&mut z, ReduceOp::Sum)),
            format!(
                "collective all_reduce on rank 0: stream: device mismatch, expected {d} (the \
                 communicator's device), got {o}"
            )
        );
    }
    Ok(())
}

#[test]
fn collectives_check_their_arguments() -> Result<(), Error> {
    argument_errors(&Comm::for_devices(&[Device::Cpu])?[0])?;
    if let Some(gpus) = nccl_gpus("collectives_check_their_arguments") {
        for d in gpus {
            argument_errors(&Comm::for_devices(&[d])?[0])?;
        }
    }
    Ok(())
}

#[test]
fn communicator_construction_errors() -> Result<(), Error> {
    let text = |r: Result<Vec<Comm>, Error>| r.err().map(|e| e.to_string()).unwrap_or_default();
    assert_eq!(
        text(Comm::for_devices(&[])),
        "collective ncclCommInitAll on rank 0: devices: no devices"
    );
    assert_eq!(
        text(Comm::for_devices(&[Device::Cuda(0), Device::Cuda(0)])),
        "collective ncclCommInitAll on rank 1: devices: cuda:0 is listed twice (NCCL takes one \
         rank per device)"
    );
    assert!(text(Comm::for_devices(&[Device::Cuda(0), Device::Cpu]))
        .starts_with("collective ncclCommInitAll on rank 1: devices: the CPU is a communicator of one rank only"));
    let id = UniqueId::from_bytes(&[7; 128])?;
    assert_eq!(id.as_bytes(), [7; 128]);
    let e = Comm::from_rank(&id, 2, 2, Device::Cpu)
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("collective ncclCommInitRank on rank 2: rank: rank 2 of a world of 2")
    );
    assert!(Comm::from_rank(&id, 0, 2, Device::Cpu).is_err());
    if !dist::nccl_available() {
        // Without NCCL a GPU communicator is a clean error, never a panic.
        let e = Comm::for_devices(Device::all_cuda().get(..1).unwrap_or(&[Device::Cuda(0)]));
        assert!(matches!(e, Err(Error::NcclUnavailable { .. })), "{e:?}");
        assert!(matches!(
            UniqueId::new(),
            Err(Error::NcclUnavailable { .. })
        ));
    }
    // How NCCL's own failures read.
    let e = Error::Nccl {
        op: "all_reduce",
        rank: Some(1),
        message: "ncclInvalidArgument: invalid argument".into(),
    };
    assert_eq!(
        e.to_string(),
        "NCCL all_reduce failed on rank 1: ncclInvalidArgument: invalid argument"
    );
    Ok(())
}

#[test]
fn one_rank_on_each_gpu() -> Result<(), Error> {
    let Some(gpus) = nccl_gpus("one_rank_on_each_gpu") else {
        return Ok(());
    };
    for d in gpus {
        let comms = Comm::for_devices(&[d])?;
        one_rank_collectives(&comms[0])?;
        // The one-process-per-GPU constructor, its id passed as bytes.
        let id = UniqueId::new()?;
        let id = UniqueId::from_bytes(&id.as_bytes())?;
        let comm = Comm::from_rank(&id, 0, 1, d)?;
        one_rank_collectives(&comm)?;
        fp8(&comm)?;
    }
    Ok(())
}

/// fp8 tensors move through NCCL from 2.24 and are refused before.
fn fp8(comm: &Comm) -> Result<(), Error> {
    let d = comm.device();
    let x = random_tensor::<f8e4m3>(&[256], 13, d)?;
    let mut y = Tensor::<f8e4m3>::zeros(&[256], d)?;
    let r = comm.all_gather(&x, &mut y);
    match dist::nccl_version()? {
        (2, minor, _) if minor < 24 => {
            assert!(message(r).contains("needs NCCL 2.24"));
        }
        _ => {
            r?;
            assert_eq!(values(&y), values(&x));
            let mut z = Tensor::<f8e5m2>::zeros(&[256], d)?;
            let w = random_tensor::<f8e5m2>(&[256], 14, d)?;
            comm.broadcast(&mut z, 0)?;
            comm.all_gather(&w, &mut z)?;
            assert_eq!(values(&z), values(&w));
        }
    }
    Ok(())
}

#[test]
fn every_gpu_in_one_process() -> Result<(), Error> {
    let Some(gpus) = nccl_gpus("every_gpu_in_one_process") else {
        return Ok(());
    };
    let g = gpus.len();
    let comms = Comm::for_devices(&gpus)?;
    let n = 4097;
    let tri = (g * (g + 1) / 2) as f32;
    // Rank r sends r + 1.
    let sends: Vec<Tensor<f32>> = comms
        .iter()
        .map(|c| Tensor::full(&[n], (c.rank() + 1) as f32, c.device()))
        .collect::<Result<_, _>>()?;
    let mut sums: Vec<Tensor<f32>> = gpus
        .iter()
        .map(|&d| Tensor::zeros(&[n], d))
        .collect::<Result<_, _>>()?;
    dist::group(|| {
        for ((c, s), r) in comms.iter().zip(&sends).zip(&mut sums) {
            c.all_reduce(s, r, ReduceOp::Sum)?;
        }
        Ok(())
    })?;
    let mut avgs = sends
        .iter()
        .map(|s| s.to_device(s.device()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut gathered: Vec<Tensor<f32>> = gpus
        .iter()
        .map(|&d| Tensor::zeros(&[g, n], d))
        .collect::<Result<_, _>>()?;
    let mut scattered: Vec<Tensor<f32>> = gpus
        .iter()
        .map(|&d| Tensor::zeros(&[n], d))
        .collect::<Result<_, _>>()?;
    let wide: Vec<Tensor<f32>> = comms
        .iter()
        .map(|c| Tensor::full(&[g * n], (c.rank() + 1) as f32, c.device()))
        .collect::<Result<_, _>>()?;
    let mut bcast: Vec<Tensor<f32>> = comms
        .iter()
        .map(|c| Tensor::full(&[n], c.rank() as f32, c.device()))
        .collect::<Result<_, _>>()?;
    dist::group(|| {
        for (r, c) in comms.iter().enumerate() {
            c.all_reduce_in_place(&mut avgs[r], ReduceOp::Avg)?;
            c.all_gather(&sends[r], &mut gathered[r])?;
            c.reduce_scatter(&wide[r], &mut scattered[r], ReduceOp::Sum)?;
            c.broadcast(&mut bcast[r], g - 1)?;
        }
        Ok(())
    })?;
    let mut rows = Vec::new();
    for r in 0..g {
        rows.extend(vec![(r + 1) as f32; n]);
    }
    for r in 0..g {
        assert_eq!(sums[r].to_vec()?, vec![tri; n], "sum on rank {r}");
        assert_eq!(
            avgs[r].to_vec()?,
            vec![tri / g as f32; n],
            "avg on rank {r}"
        );
        assert_eq!(gathered[r].to_vec()?, rows, "all_gather on rank {r}");
        assert_eq!(
            scattered[r].to_vec()?,
            vec![tri; n],
            "reduce_scatter on rank {r}"
        );
        assert_eq!(
            bcast[r].to_vec()?,
            vec![(g - 1) as f32; n],
            "broadcast on rank {r}"
        );
    }
    Ok(())
}

#[test]
fn one_thread_per_gpu() -> Result<(), Error> {
    let Some(gpus) = nccl_gpus("one_thread_per_gpu") else {
        return Ok(());
    };
    let g = gpus.len();
    let id = UniqueId::new()?;
    let bytes = id.as_bytes();
    let results: Vec<Result<Vec<f32>, Error>> = std::thread::scope(|scope| {
        let handles: Vec<_> = gpus
            .iter()
            .enumerate()
            .map(|(r, &d)| {
                scope.spawn(move || {
                    let id = UniqueId::from_bytes(&bytes)?;
                    let comm = Comm::from_rank(&id, r, g, d)?;
                    let mut t = Tensor::full(&[1000], (r + 1) as f32, d)?;
                    comm.all_reduce_in_place(&mut t, ReduceOp::Sum)?;
                    t.to_vec()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Interop {
                        message: "rank panicked".into(),
                    })
                })
            })
            .collect()
    });
    for (r, v) in results.into_iter().enumerate() {
        assert_eq!(v?, vec![(g * (g + 1) / 2) as f32; 1000], "rank {r}");
    }
    Ok(())
}

#[test]
fn collectives_are_recorded_into_graphs() -> Result<(), Error> {
    // A CPU graph records kernels only: a collective there is refused.
    let host = Comm::for_devices(&[Device::Cpu])?.remove(0);
    let mut t = Tensor::full(&[8], 1.0f32, Device::Cpu)?;
    let e = Graph::capture(&Stream::Cpu, |s| {
        host.on(s).all_reduce_in_place(&mut t, ReduceOp::Sum)
    });
    assert!(message(e.map(|_| ())).contains("not recorded into CPU graphs"));
    let Some(gpus) = nccl_gpus("collectives_are_recorded_into_graphs") else {
        return Ok(());
    };
    for d in gpus {
        let comm = Comm::for_devices(&[d])?.remove(0);
        let n = 5000;
        let a = random_tensor::<f32>(&[n], 21, d)?;
        let mut b = Tensor::zeros(&[n], d)?;
        let mut c = Tensor::zeros(&[n], d)?;
        let stream = d.new_stream()?;
        // Warm up outside the capture: the kernel is found and NCCL connects.
        dist_scale::on(&stream).launch(&a, &mut b)?;
        comm.on(&stream)
            .all_reduce_in_place(&mut b, ReduceOp::Sum)?;
        stream.synchronize()?;
        let g = Graph::capture(&stream, |s| {
            dist_scale::on(s).launch(&a, &mut b)?;
            comm.on(s).all_reduce_in_place(&mut b, ReduceOp::Sum)?;
            comm.on(s).all_reduce(&b, &mut c, ReduceOp::Max)?;
            dist_scale::on(s).launch(&c, &mut b)
        })?;
        assert_eq!(g.launches(), 4);
        // The communicator may go: the graph holds it.
        drop(comm);
        b.copy_from_slice(&vec![0.0; n])?;
        for _ in 0..2 {
            g.replay()?;
        }
        stream.synchronize()?;
        let want: Vec<f32> = a.to_vec()?.iter().map(|x| x * 3.0 * 3.0).collect();
        assert_eq!(b.to_vec()?, want, "on {d}");
    }
    Ok(())
}

fn example_sizes(gpu: bool) -> Vec<tensor_parallel_mlp::Sizes> {
    use tensor_parallel_mlp::Sizes;
    let mut s = vec![
        Sizes {
            tokens: 64,
            hidden: 128,
            inter: 256,
        },
        Sizes {
            tokens: 67,
            hidden: 130,
            inter: 248,
        },
    ];
    if gpu {
        s.push(Sizes {
            tokens: 256,
            hidden: 512,
            inter: 1024,
        });
    }
    s
}

#[test]
fn tensor_parallel_mlp_example() -> Result<(), Box<dyn std::error::Error>> {
    let devices = tensor_parallel_mlp::ranks(None)?;
    if devices[0].is_cuda() && !dist::nccl_available() {
        println!("tensor_parallel_mlp_example: skipped, NCCL is not usable");
        return Ok(());
    }
    for sz in example_sizes(devices[0].is_cuda()) {
        let r = tensor_parallel_mlp::run(&devices, sz, true, false)?;
        for l in r.lines {
            println!("{l}");
        }
    }
    Ok(())
}

/// The README's "Multiple GPUs" block, line for line (see the test below).
#[test]
fn readme_multiple_gpus() -> Result<(), Error> {
    if !Device::all_cuda().is_empty() && !dist::nccl_available() {
        println!("readme_multiple_gpus: skipped, NCCL is not usable");
        return Ok(());
    }
    use tile::dist::{self, Comm, ReduceOp};
    // Every visible GPU, one rank each (the host, one rank, where there is none).
    let devices = match Device::all_cuda() {
        gpus if gpus.is_empty() => vec![Device::Cpu],
        gpus => gpus,
    };
    for info in Device::cuda_devices()? {
        println!("{info}"); // cuda:0: NVIDIA H200, compute capability 9.0 (sm_90a), 139.8 GiB
    }
    let comms = Comm::for_devices(&devices)?;
    let mut parts = devices
        .iter()
        .map(|&d| Tensor::full(&[1024], 1.0f32, d))
        .collect::<Result<Vec<_>, _>>()?;
    // One thread drives every GPU: their calls go in one group.
    dist::group(|| {
        for (comm, part) in comms.iter().zip(&mut parts) {
            comm.all_reduce_in_place(part, ReduceOp::Sum)?;
        }
        Ok(())
    })?;
    assert_eq!(parts[0].to_vec()?, vec![devices.len() as f32; 1024]);
    // The sum, copied to the last device (a peer copy between GPUs).
    let last = parts[0].to_device(devices[devices.len() - 1])?;
    assert_eq!(last.to_vec()?, parts[0].to_vec()?);
    Ok(())
}

#[test]
fn readme_block_is_this_code() {
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect()
    };
    let root = env!("CARGO_MANIFEST_DIR");
    let (Ok(readme), Ok(this)) = (
        std::fs::read_to_string(format!("{root}/README.md")),
        std::fs::read_to_string(format!("{root}/tests/dist.rs")),
    ) else {
        // A test binary copied to another machine, without the sources.
        println!("readme_block_is_this_code: skipped, no sources at {root}");
        return;
    };
    let this = lines(&this);
    let start = readme
        .find("## Multiple GPUs")
        .expect("README has a Multiple GPUs section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let open = section.find("```rust\n").expect("a rust block") + 8;
    let body = &section[open..open + section[open..].find("```").unwrap_or(0)];
    let want = lines(body);
    assert!(want.len() > 10);
    assert!(
        this.windows(want.len()).any(|w| w == want.as_slice()),
        "README block not found in tests/dist.rs:\n{body}"
    );
}
