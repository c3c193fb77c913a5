//! Compiles the kernels in `src/` ahead of time, as a downstream crate's build
//! script would. Any failure fails the build: the tests rely on the kernels
//! being linked, not compiled at run time.
fn main() {
    let report = match tile_core::build::Builder::new()
        .dir("src")
        .strict(true)
        .compile()
    {
        Ok(r) => r,
        Err(e) => panic!("tile: ahead-of-time kernel build failed: {e}"),
    };
    if report.kernels == 0 || report.c_libs != report.kernels {
        panic!(
            "tile: expected every kernel in src/ to be built; found {} kernel(s), built {} C librar(ies)",
            report.kernels, report.c_libs
        );
    }
}
