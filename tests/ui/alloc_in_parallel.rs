use tile::prelude::*;

// Shared and fragment buffers belong to the block, not to one element.
#[tile::kernel(threads = 128)]
pub fn alloc_in_parallel(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(1, threads, |bx| {
        for i in T::parallel(64) {
            let z = T::alloc_shared::<f32>([4]);
            let w = T::alloc_fragment::<f32>([4]);
            c[i] = a[i];
        }
    });
}

fn main() {}
