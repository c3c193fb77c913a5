use tile::prelude::*;

#[tile::kernel(block = 64, threads = 128)]
pub fn bad_pipeline(a: Tensor<f16, (M, K)>, c: TensorMut<f32, (M, block)>) {
    T::kernel(T::ceildiv(M, block), threads, |bx| {
        let a_s = T::alloc_shared::<f16>([block, block]);
        let acc = T::alloc_fragment::<f32>([block, block]);
        for ko in T::pipelined(T::ceildiv(K, block), K) {
            T::copy(a.at([bx * block, ko * block]), a_s);
            T::gemm(a_s, a_s, acc, transpose_c = true);
        }
        T::copy(acc, c.at([bx * block, 0]));
    });
}

fn main() {}
