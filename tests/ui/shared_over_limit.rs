use tile::prelude::*;

// A pass (not the frontend) finds that the tiles do not fit in shared memory;
// the error still points at the user's allocation.
#[tile::kernel(block_m = 256, block_k = 256, threads = 128)]
pub fn shared_over_limit(a: Tensor<f32, (M, K)>, c: TensorMut<f32, (M, K)>) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        let a_s = T::alloc_shared::<f32>([block_m, block_k]);
        T::copy(a.at([bx * block_m, 0]), a_s);
        T::copy(a_s, c.at([bx * block_m, 0]));
    });
}

fn main() {}
