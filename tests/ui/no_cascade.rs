use tile::prelude::*;

const BLOCK: i64 = 256;

// The non-literal parameter is reported once: its uses in the body and the
// call in `main` (through the fallback launcher) add no further errors.
#[tile::kernel(block_n = BLOCK, threads = 128)]
pub fn scale(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] * 2.0;
        }
    });
}

fn main() -> Result<(), tile::Error> {
    let a = Tensor::<f32>::zeros(&[4], Device::Cpu)?;
    let mut c = Tensor::<f32>::zeros(&[4], Device::Cpu)?;
    scale(&a, &mut c)?;
    Ok(())
}
