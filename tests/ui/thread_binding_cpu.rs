use tile::prelude::*;

// The thread index exists only on CUDA: a kernel also built for the CPU
// cannot use it.
#[tile::kernel(n = 128, threads = 128)]
pub fn lane_ids(c: TensorMut<i32, (n,)>) {
    T::kernel(1, threads, |bx| {
        let t = T::alloc_local::<i32>([1]);
        t[0] = T::get_thread_binding();
        c[t[0]] = t[0];
    });
}

fn main() {}
