use tile::prelude::*;

// Sizes that would overflow the compiler's or the device's arithmetic, or
// not fit where the buffer lives, are refused where they are written.
#[tile::kernel(m = 4294967296, threads = 128)]
pub fn huge_tile(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(1, threads, |bx| {
        let s = T::alloc_shared::<f32>([m, m]);
        for (i, j) in T::parallel([m, m]) {
            c[i] = a[j];
        }
        T::copy(a.at([9223372036854775807]), s);
    });
}

#[tile::kernel(bm = 128, bn = 128, bk = 32, threads = 2)]
pub fn register_budget(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel([T::ceildiv(N, bn), T::ceildiv(M, bm)], threads, |bx, by| {
        let a_s = T::alloc_shared::<f16>([bm, bk]);
        let b_s = T::alloc_shared::<f16>([bk, bn]);
        let acc = T::alloc_fragment::<f32>([bm, bn]);
        T::clear(acc);
        for ko in T::pipelined(T::ceildiv(K, bk), 1000) {
            T::copy(a.at([by * bm, ko * bk]), a_s);
            T::copy(b.at([ko * bk, bx * bn]), b_s);
            T::gemm(a_s, b_s, acc);
        }
        T::copy(acc, c.at([by * bm, bx * bn]));
    });
}

#[tile::kernel(threads = 128)]
pub fn big_local(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(3000000000, threads, |bx| {
        let l = T::alloc_local::<f32>([8388608]);
        l[0] = a[0];
        c[0] = l[0];
    });
}

#[tile::kernel(threads = 128)]
pub fn cpu_stack(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(1, threads, |bx| {
        let s1 = T::alloc_shared::<f32>([2048, 2048]);
        let s2 = T::alloc_shared::<f32>([2048, 2048]);
        s1[(0, 0)] = a[0];
        s2[(0, 0)] = s1[(0, 0)];
        c[0] = s2[(0, 0)];
    });
}

fn main() {}
