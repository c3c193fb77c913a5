use tile::prelude::*;

// One gemm accumulator placed two ways in one nest (a symmetrization): its
// layout is fixed by the gemm, so no thread holds both elements.
#[tile::kernel(bm = 64, bk = 32, threads = 128)]
pub fn symmetrize(a: Tensor<f16, (bm, bk)>, c: TensorMut<f32, (bm, bm)>) {
    T::kernel(1, threads, |bx| {
        let a_s = T::alloc_shared::<f16>([bm, bk]);
        let acc = T::alloc_fragment::<f32>([bm, bm]);
        T::copy(a, a_s);
        T::clear(acc);
        T::gemm(a_s, a_s, acc, transpose_b = true);
        for (i, j) in T::parallel([bm, bm]) {
            c[(i, j)] = (acc[(i, j)] + acc[(j, i)]) * 0.5;
        }
    });
}

fn main() {}
