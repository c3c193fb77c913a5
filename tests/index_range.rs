//! 32-bit index safety at the edge of the index range, on the CPU and, where
//! there is one, the GPU.
//!
//! Indices are 32-bit `int`s: the runtime admits dims and grid extents up to
//! `i32::MAX` and the compiler proves the index arithmetic of every bounds
//! guard within `int`, or computes the guard in 64 bits. With N just below
//! 2^31 and a block of 1000, the last block's guard `bx * 1000 + 999 < N`
//! needs 64 bits (it used to wrap negative and let the block write past the
//! end). Each output is a view of a larger buffer whose tail is a guard
//! region the kernel must leave untouched. About 2 GiB of memory.

use tile::prelude::*;

#[tile::kernel(block = 1000, threads = 128)]
pub fn fill7(c: TensorMut<u8, (N,)>) {
    T::kernel(T::ceildiv(N, block), threads, |bx| {
        for i in T::parallel(block) {
            c[bx * block + i] = 7u8;
        }
    });
}

const GUARD: usize = 1 << 16;
const POISON: u8 = 0xAB;

/// Runs `fill7` on `dev` on the first `n` elements of a buffer of
/// `n + GUARD`; returns the launch result and the elements from `n - tail`
/// to the end.
fn run(dev: Device, n: usize, tail: usize) -> (Result<(), Error>, Vec<u8>) {
    let big = Tensor::<u8>::full(&[n + GUARD], POISON, dev).expect("2 GiB buffer");
    let mut c = big.slice(0, 0..n).expect("view");
    let r = fill7(&mut c);
    let end = big.slice(0, n - tail..n + GUARD).expect("view");
    (r, end.to_vec().expect("read back"))
}

/// One test, so the 2 GiB buffers are never alive at once: on the CPU, and
/// on the GPU where there is one (the same guards in CUDA).
#[test]
fn at_two_to_the_31() {
    let mut devices = vec![Device::Cpu];
    if Device::cuda_available() {
        devices.push(Device::cuda(0).expect("cuda:0"));
    }
    for dev in devices {
        just_below_two_to_the_31_writes_nothing_past_the_end(dev);
        above_two_to_the_31_is_refused_before_anything_is_written(dev);
    }
}

fn just_below_two_to_the_31_writes_nothing_past_the_end(dev: Device) {
    let n = i32::MAX as usize;
    let (r, end) = run(dev, n, 4096);
    r.expect("launch");
    let (inside, guard) = end.split_at(4096);
    assert!(
        inside.iter().all(|&x| x == 7),
        "the last elements are written"
    );
    assert!(
        guard.iter().all(|&x| x == POISON),
        "the kernel wrote past the end of its tensor"
    );
}

fn above_two_to_the_31_is_refused_before_anything_is_written(dev: Device) {
    let n = (1usize << 31) + 1000;
    let (r, end) = run(dev, n, 4096);
    let e = r.expect_err("a dim past i32::MAX");
    assert!(
        e.to_string().contains("32-bit index range"),
        "unexpected error: {e}"
    );
    assert!(end.iter().all(|&x| x == POISON), "a refused launch wrote");
}

#[tile::kernel(threads = 128)]
pub fn square_grid(c: TensorMut<u8, (N,)>) {
    T::kernel(N * N, threads, |bx| {
        c[bx % N] = 1u8;
    });
}

/// A grid extent past `i32::MAX` is refused on the CPU too (block indices
/// are 32-bit `int`s there as well).
#[test]
fn a_grid_past_two_to_the_31_is_refused() {
    let mut c = Tensor::<u8>::full(&[1 << 16], POISON, Device::Cpu).expect("buffer");
    let e = square_grid(&mut c).expect_err("2^32 blocks");
    assert!(e.to_string().contains("block indices are 32-bit"), "{e}");
    assert!(c.to_vec().expect("read").iter().all(|&x| x == POISON));
}
