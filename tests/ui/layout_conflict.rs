use tile::prelude::*;

// Two gemm accumulators read transposed to each other in one nest: each
// one's layout is fixed by its gemm, so no thread holds both elements.
#[tile::kernel(bm = 64, bk = 32, threads = 128)]
pub fn transposed_accumulators(a: Tensor<f16, (bm, bk)>, b: Tensor<f16, (bk, bm)>, c: TensorMut<f32, (bm, bm)>) {
    T::kernel(1, threads, |bx| {
        let a_s = T::alloc_shared::<f16>([bm, bk]);
        let b_s = T::alloc_shared::<f16>([bk, bm]);
        let acc1 = T::alloc_fragment::<f32>([bm, bm]);
        let acc2 = T::alloc_fragment::<f32>([bm, bm]);
        T::copy(a, a_s);
        T::copy(b, b_s);
        T::clear(acc1);
        T::clear(acc2);
        T::gemm(a_s, b_s, acc1);
        T::gemm(b_s, a_s, acc2, transpose_a = true, transpose_b = true);
        for (i, j) in T::parallel([bm, bm]) {
            let x = acc1[(i, j)] * 2.0;
            c[(i, j)] = x + acc2[(j, i)];
        }
    });
}

fn main() {}
