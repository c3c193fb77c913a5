//! Compiles the kernels of `src/` ahead of time (C for the CPU, and cubins when nvcc
//! is found), so the Python module needs no compiler at run time on the CPU.
fn main() {
    tile_core::build::Builder::new()
        .dir("src")
        .compile()
        .expect("tile kernels");
}
