//! The candle example (`examples/candle_rmsnorm.rs`): a tile kernel as a candle custom
//! op inside a small model, checked against candle's own ops. Needs `--features candle`;
//! the CUDA case needs `--features candle-cuda` and a GPU (skipped when candle finds no
//! device; a build with `candle-cuda` links the CUDA libraries, so the driver library
//! must be installed for the binary to start at all).

#[path = "../examples/candle_rmsnorm.rs"]
#[allow(dead_code)]
mod candle_rmsnorm;

#[test]
fn tile_rmsnorm_matches_candle_on_the_cpu() {
    for m in [1, 7, 64] {
        match candle_rmsnorm::run(&candle_core::Device::Cpu, m) {
            Ok(line) => println!("{line}"),
            Err(e) => panic!("{e}"),
        }
    }
}

#[cfg(feature = "candle-cuda")]
#[test]
fn tile_rmsnorm_matches_candle_on_cuda() {
    let device = match candle_core::Device::new_cuda(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    // The kernel reads and writes candle's device memory on candle's stream; ragged and
    // larger row counts too.
    for m in [1, 7, 64, 4099] {
        match candle_rmsnorm::run(&device, m) {
            Ok(line) => println!("{line}"),
            Err(e) => panic!("{e}"),
        }
    }
}
