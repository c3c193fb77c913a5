use tile::prelude::*;

#[tile::kernel(bm = 16, blocks = 4, threads = 64)]
pub fn bad_persistent(a: Tensor<f32, (M, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(blocks, threads, |bid| {
        // The domain has two dims, the loop binds one name.
        for t in T::persistent([T::ceildiv(N, bm), T::ceildiv(M, bm)], blocks, bid) {
            c[(t, 0)] = a[(t, 0)];
        }
        // No block index.
        for (tx, ty) in T::persistent([4, 4], blocks) {
            c[(ty, tx)] = a[(ty, tx)];
        }
        // A wave of no blocks.
        for t in T::persistent(8, 0, bid) {
            c[(t, 0)] = a[(t, 0)];
        }
    });
}

fn main() {}
