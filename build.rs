//! Builds the kernels of `examples/` and `tests/` ahead of time through the
//! public build API, exactly as a downstream crate's build script would.
fn main() {
    let report = tile_core::build::Builder::new()
        .dir("examples")
        .dir("examples/bench")
        .dir("tests")
        .dir("tests/kernels")
        .compile();
    match report {
        Ok(r) => {
            if r.nvcc.is_none() {
                println!("cargo:warning=tile: nvcc not found; CUDA kernels will be compiled at run time with NVRTC");
            }
        }
        Err(e) => println!("cargo:warning=tile: ahead-of-time kernel build skipped: {e}"),
    }
}
