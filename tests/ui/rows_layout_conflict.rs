use tile::prelude::*;

// `m` holds the row maxima of the tensor-core accumulator `s`, so each
// thread keeps the rows of its accumulator registers; a nest over `t`
// (another shape, split over threads element by element) cannot read it.
#[tile::kernel(bm = 64, bk = 32, bw = 32, threads = 128)]
pub fn rows_read_elsewhere(a: Tensor<f16, (bm, bk)>, b: Tensor<f16, (bk, bm)>, c: TensorMut<f32, (bm, bw)>) {
    T::kernel(1, threads, |bx| {
        let a_s = T::alloc_shared::<f16>([bm, bk]);
        let b_s = T::alloc_shared::<f16>([bk, bm]);
        let s = T::alloc_fragment::<f32>([bm, bm]);
        let m = T::alloc_fragment::<f32>([bm]);
        let t = T::alloc_fragment::<f32>([bm, bw]);
        T::copy(a, a_s);
        T::copy(b, b_s);
        T::clear(s);
        T::gemm(a_s, b_s, s);
        T::reduce_max(s, m, 1);
        for (i, j) in T::parallel([bm, bw]) {
            t[(i, j)] = m[i] + 1.0;
        }
        T::copy(t, c);
    });
}

fn main() {}
