//! The candle example (`examples/candle_rmsnorm.rs`): a tile kernel as a candle custom
//! op inside a small model, checked against candle's own ops. Needs `--features candle`;
//! the CUDA case needs `--features candle-cuda` and a GPU (skipped without one).

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
    match candle_rmsnorm::run(&device, 64) {
        Ok(line) => println!("{line}"),
        Err(e) => panic!("{e}"),
    }
}
