//! The benchmark's rows as a roofline: achieved TFLOP/s (log y) against
//! arithmetic intensity in flop per DRAM byte (log x), under the H200's
//! ceilings. Each tile kernel is a filled marker, its baseline on the same
//! work (cuBLAS, cuBLASLt) a hollow one of the same colour and shape; one
//! colour and shape per kernel (the legend), one point per shape it ran.
//! Memory-bound rows have no baseline kernel: theirs is the copy bandwidth,
//! which is the measured memory roof itself.
//!
//! The picture is hand-written SVG (a few dozen elements: no plotting crate
//! is worth its dependencies here), written to `$TILE_ROOFLINE` or
//! `roofline.svg` in the current directory.

use std::fmt::Write as _;

use super::Row;

/// Dense tensor-core peaks of the H200 SXM (NVIDIA's H200 spec sheet, dense
/// figures, without sparsity), in TFLOP/s: FP16/BF16 and FP8.
pub(crate) const PEAK_DENSE16_TFLOPS: f64 = 989.4;
pub(crate) const PEAK_FP8_TFLOPS: f64 = 1978.9;
/// The H200's nominal HBM3e bandwidth (same spec sheet), in GB/s; drawn
/// dashed beside the copy bandwidth the benchmark measures.
pub(crate) const NOMINAL_GBS: f64 = 4800.0;

/// Which compute roof bounds a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Roof {
    /// f16/bf16 tensor cores (and the memory-bound rows, which never reach
    /// any compute roof).
    Dense16,
    Fp8,
}

impl Roof {
    fn tflops(self) -> f64 {
        match self {
            Roof::Dense16 => PEAK_DENSE16_TFLOPS,
            Roof::Fp8 => PEAK_FP8_TFLOPS,
        }
    }
}

/// What a roofline point needs from one benchmark row.
#[derive(Debug, Clone)]
pub(crate) struct Work {
    /// Floating-point operations of one run (GEMM: 2·M·N·K).
    pub flops: f64,
    /// The kernel's minimum DRAM traffic: every input read once, every
    /// output written once (GEMM: (M·K + K·N)·in + M·N·out bytes).
    pub bytes: f64,
    /// Median milliseconds of tile's kernel.
    pub tile_ms: f64,
    /// Median milliseconds of the baseline on the same work; `None` where the
    /// baseline is the copy bandwidth.
    pub base_ms: Option<f64>,
    pub roof: Roof,
}

impl Work {
    /// Flop per byte.
    fn intensity(&self) -> f64 {
        self.flops / self.bytes
    }

    fn tflops(&self, ms: f64) -> f64 {
        self.flops / ms / 1e9
    }

    /// What the roofline allows at this intensity (TFLOP/s), with the
    /// measured copy bandwidth as the memory roof.
    fn attainable(&self, copy_gbs: f64) -> f64 {
        (copy_gbs * self.intensity() / 1e3).min(self.roof.tflops())
    }

    /// A row with no flops (a transpose) has no place on a log axis.
    fn plottable(&self) -> bool {
        self.flops > 0.0 && self.bytes > 0.0 && self.tile_ms > 0.0
    }
}

/// Writes the roofline of `rows` to `$TILE_ROOFLINE` (or `roofline.svg`),
/// prints each plotted row's place under its roof and where the file went.
/// A file that cannot be written is reported, not an error: the tables
/// printed before and after it matter more.
pub(crate) fn write(rows: &[Row], copy_gbs: f64, device: &str) {
    print_points(rows, copy_gbs);
    let path = std::env::var_os("TILE_ROOFLINE").unwrap_or_else(|| "roofline.svg".into());
    let shown = std::path::Path::new(&path).display();
    match std::fs::write(&path, svg(rows, copy_gbs, device)) {
        Ok(()) => println!(
            "roofline: wrote {shown} ({} of {} rows; rows without flops are left out)",
            rows.iter().filter(|r| r.work.plottable()).count(),
            rows.len()
        ),
        Err(e) => println!("roofline: could not write {shown}: {e}"),
    }
}

/// The numbers behind the picture, for logs (the picture itself is not in
/// them).
fn print_points(rows: &[Row], copy_gbs: f64) {
    println!();
    println!(
        "{:<46} {:>9} {:>10} {:>10} {:>10} {:>8}",
        "roofline", "flop/B", "tile TF/s", "base TF/s", "roof TF/s", "of roof"
    );
    for r in rows.iter().filter(|r| r.work.plottable()) {
        let w = &r.work;
        let (t, roof) = (w.tflops(w.tile_ms), w.attainable(copy_gbs));
        let base = w
            .base_ms
            .map_or_else(|| "-".to_string(), |b| format!("{:.1}", w.tflops(b)));
        println!(
            "{:<46} {:>9.2} {:>10.1} {:>10} {:>10.1} {:>7.1}%",
            r.what,
            w.intensity(),
            t,
            base,
            roof,
            100.0 * t / roof
        );
    }
}

/// A log10 axis over whole decades `lo..=hi` (exponents), drawn from pixel
/// `p0` (at 10^lo) to `p1` (at 10^hi); `p1 < p0` for a y axis.
#[derive(Debug, Clone, Copy)]
struct LogAxis {
    lo: i32,
    hi: i32,
    p0: f64,
    p1: f64,
}

impl LogAxis {
    /// The decades that cover `min..=max` (at least one).
    fn covering(min: f64, max: f64, p0: f64, p1: f64) -> LogAxis {
        let lo = min.log10().floor() as i32;
        let hi = (max.log10().ceil() as i32).max(lo + 1);
        LogAxis { lo, hi, p0, p1 }
    }

    fn px(&self, v: f64) -> f64 {
        let f = (v.log10() - f64::from(self.lo)) / f64::from(self.hi - self.lo);
        self.p0 + f * (self.p1 - self.p0)
    }

    fn min(&self) -> f64 {
        10f64.powi(self.lo)
    }

    fn max(&self) -> f64 {
        10f64.powi(self.hi)
    }
}

/// Plot area and canvas, in pixels.
const LEFT: f64 = 80.0;
const TOP: f64 = 50.0;
const PLOT_W: f64 = 640.0;
const PLOT_H: f64 = 480.0;
const LEGEND_W: f64 = 400.0;
/// Height of one legend line.
const LINE: f64 = 17.0;

/// One colour per kernel (distinguishable, also in grey print), then the
/// next marker shape once they are used up.
const COLOURS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Circle,
    Square,
    Diamond,
    Triangle,
}

/// The colour and shape of the `i`-th kernel.
fn style(i: usize) -> (&'static str, Shape) {
    let shapes = [
        Shape::Circle,
        Shape::Square,
        Shape::Diamond,
        Shape::Triangle,
    ];
    (
        COLOURS[i % COLOURS.len()],
        shapes[(i / COLOURS.len()) % shapes.len()],
    )
}

/// The kernels (legend entries) in first-appearance order.
fn series(rows: &[Row]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for r in rows.iter().filter(|r| r.work.plottable()) {
        if !out.contains(&r.series.as_str()) {
            out.push(&r.series);
        }
    }
    out
}

/// The SVG text of the roofline of `rows` (a pure function: tested below).
pub(crate) fn svg(rows: &[Row], copy_gbs: f64, device: &str) -> String {
    let (x, y) = axes(rows, copy_gbs);
    let names = series(rows);
    let height = (TOP + PLOT_H + 60.0).max(TOP + LINE * (names.len() as f64 + 9.0));
    let width = LEFT + PLOT_W + 30.0 + LEGEND_W;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <clipPath id=\"plot\"><rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{PLOT_W}\" height=\"{PLOT_H}\"/></clipPath>\n"
    );
    let _ = writeln!(
        s,
        "<text x=\"{LEFT}\" y=\"{}\" font-size=\"15\">Roofline: tile (filled) and baselines (hollow) on {}</text>",
        TOP - 20.0,
        esc(device)
    );
    grid(&mut s, x, y);
    roofs(&mut s, x, y, copy_gbs);
    points(&mut s, rows, &names, x, y);
    legend(&mut s, &names, copy_gbs);
    s.push_str("</svg>\n");
    s
}

/// Axes wide enough for every point and for the ridge points of the roofs.
fn axes(rows: &[Row], copy_gbs: f64) -> (LogAxis, LogAxis) {
    let (mut xmin, mut xmax) = (1.0f64, PEAK_FP8_TFLOPS * 1e3 / copy_gbs.min(NOMINAL_GBS));
    let (mut ymin, mut ymax) = (10.0f64, PEAK_FP8_TFLOPS * 1.5);
    for r in rows.iter().filter(|r| r.work.plottable()) {
        let w = &r.work;
        xmin = xmin.min(w.intensity());
        xmax = xmax.max(w.intensity());
        for ms in std::iter::once(w.tile_ms).chain(w.base_ms) {
            ymin = ymin.min(w.tflops(ms));
            ymax = ymax.max(w.tflops(ms));
        }
    }
    // Room left and right, so that markers are not cut at the edges.
    let x = LogAxis::covering(xmin / 2.0, xmax * 2.0, LEFT, LEFT + PLOT_W);
    let y = LogAxis::covering(ymin, ymax, TOP + PLOT_H, TOP);
    (x, y)
}

/// Decade grid lines, faint 2..9 lines between them, tick labels, axis titles.
fn grid(s: &mut String, x: LogAxis, y: LogAxis) {
    let (bottom, right) = (TOP + PLOT_H, LEFT + PLOT_W);
    for e in x.lo..=x.hi {
        for m in 1..10 {
            let v = f64::from(m) * 10f64.powi(e);
            if v > x.max() {
                break;
            }
            let (px, c) = (x.px(v), if m == 1 { "#bbb" } else { "#eee" });
            let _ = writeln!(
                s,
                "<line x1=\"{px:.1}\" y1=\"{TOP}\" x2=\"{px:.1}\" y2=\"{bottom}\" stroke=\"{c}\"/>"
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x.px(10f64.powi(e)),
            bottom + 16.0,
            decade(e)
        );
    }
    for e in y.lo..=y.hi {
        for m in 1..10 {
            let v = f64::from(m) * 10f64.powi(e);
            if v > y.max() {
                break;
            }
            let (py, c) = (y.px(v), if m == 1 { "#bbb" } else { "#eee" });
            let _ = writeln!(
                s,
                "<line x1=\"{LEFT}\" y1=\"{py:.1}\" x2=\"{right}\" y2=\"{py:.1}\" stroke=\"{c}\"/>"
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT - 6.0,
            y.px(10f64.powi(e)) + 4.0,
            decade(e)
        );
    }
    let _ = write!(
        s,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{PLOT_W}\" height=\"{PLOT_H}\" fill=\"none\" stroke=\"black\"/>\n\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">arithmetic intensity (flop per byte of minimum DRAM traffic)</text>\n\
         <text transform=\"translate({},{}) rotate(-90)\" text-anchor=\"middle\">achieved TFLOP/s</text>\n",
        LEFT + PLOT_W / 2.0,
        bottom + 36.0,
        LEFT - 50.0,
        TOP + PLOT_H / 2.0
    );
}

/// `10^e` as a tick label: plain numbers from 0.001 to 100000.
fn decade(e: i32) -> String {
    match e {
        -3..=-1 => format!("{}", 10f64.powi(e)),
        0..=5 => format!("{}", 10i64.pow(e as u32)),
        _ => format!("1e{e}"),
    }
}

/// The ceilings: measured memory roof (solid) and nominal (dashed) up to
/// the fp8 peak, then the two compute roofs from the measured ridge points.
fn roofs(s: &mut String, x: LogAxis, y: LogAxis, copy_gbs: f64) {
    let diagonal = |s: &mut String, gbs: f64, dash: &str| {
        // Memory roof: TFLOP/s = GB/s · flop/B / 1000, up to the top roof.
        let x1 = PEAK_FP8_TFLOPS * 1e3 / gbs;
        let (y0, y1) = (gbs * x.min() / 1e3, PEAK_FP8_TFLOPS);
        line(s, (x.px(x.min()), y.px(y0)), (x.px(x1), y.px(y1)), dash);
    };
    diagonal(s, copy_gbs, "");
    diagonal(s, NOMINAL_GBS, " stroke-dasharray=\"6 4\"");
    for peak in [PEAK_DENSE16_TFLOPS, PEAK_FP8_TFLOPS] {
        let ridge = peak * 1e3 / copy_gbs;
        line(
            s,
            (x.px(ridge), y.px(peak)),
            (x.px(x.max()), y.px(peak)),
            "",
        );
    }
    // Each compute roof's label at its height, left of where the memory
    // roofs meet it: above the memory roof no point can sit.
    for (peak, name) in [(PEAK_DENSE16_TFLOPS, "f16/bf16"), (PEAK_FP8_TFLOPS, "fp8")] {
        let end = x.px(peak * 1e3 / copy_gbs.max(NOMINAL_GBS)) - 8.0;
        let _ = writeln!(
            s,
            "<text x=\"{end:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#333\">{name} dense {peak} TFLOP/s</text>",
            y.px(peak) + 4.0
        );
    }
}

fn line(s: &mut String, (x0, y0): (f64, f64), (x1, y1): (f64, f64), extra: &str) {
    let _ = writeln!(
        s,
        "<line x1=\"{x0:.1}\" y1=\"{y0:.1}\" x2=\"{x1:.1}\" y2=\"{y1:.1}\" stroke=\"black\" \
         stroke-width=\"1.5\" clip-path=\"url(#plot)\"{extra}/>"
    );
}

/// Every plottable row: the baseline's hollow marker first, so the tile
/// kernel's filled one stays visible where they coincide. Hovering a marker
/// shows its row (`<title>`).
fn points(s: &mut String, rows: &[Row], names: &[&str], x: LogAxis, y: LogAxis) {
    for r in rows.iter().filter(|r| r.work.plottable()) {
        let w = &r.work;
        let i = names.iter().position(|n| *n == r.series).unwrap_or(0);
        let (colour, shape) = style(i);
        let px = x.px(w.intensity());
        if let Some(b) = w.base_ms {
            let t = w.tflops(b);
            let tip = format!("{} (baseline: {})", r.what, r.base);
            marker(s, shape, (px, y.px(t)), colour, false, &tip);
        }
        let t = w.tflops(w.tile_ms);
        let tip = format!(
            "{}: {:.1} TFLOP/s at {:.2} flop/B",
            r.what,
            t,
            w.intensity()
        );
        marker(s, shape, (px, y.px(t)), colour, true, &tip);
    }
}

/// One marker, filled (tile) or hollow (baseline), with a hover title.
fn marker(s: &mut String, shape: Shape, (x, y): (f64, f64), colour: &str, filled: bool, tip: &str) {
    let fill = if filled { colour } else { "none" };
    let paint = format!("fill=\"{fill}\" stroke=\"{colour}\" stroke-width=\"1.5\"");
    let r = 4.5;
    let body = match shape {
        Shape::Circle => format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r}\" {paint}>"),
        Shape::Square => format!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{}\" height=\"{}\" {paint}>",
            x - r * 0.85,
            y - r * 0.85,
            r * 1.7,
            r * 1.7
        ),
        Shape::Diamond => format!(
            "<polygon points=\"{x:.1},{:.1} {:.1},{y:.1} {x:.1},{:.1} {:.1},{y:.1}\" {paint}>",
            y - r * 1.2,
            x + r * 1.2,
            y + r * 1.2,
            x - r * 1.2
        ),
        Shape::Triangle => format!(
            "<polygon points=\"{x:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\" {paint}>",
            y - r * 1.2,
            x + r * 1.1,
            y + r * 0.8,
            x - r * 1.1,
            y + r * 0.8
        ),
    };
    let close = body[1..]
        .split_whitespace()
        .next()
        .unwrap_or("g")
        .to_string();
    let _ = writeln!(s, "{body}<title>{}</title></{close}>", esc(tip));
}

/// The kernels by colour and shape, then what the markers and lines mean.
fn legend(s: &mut String, names: &[&str], copy_gbs: f64) {
    let x0 = LEFT + PLOT_W + 30.0;
    let mut yy = TOP + 4.0;
    let text = |s: &mut String, yy: f64, t: &str| {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{:.1}\">{}</text>",
            x0 + 22.0,
            yy + 4.0,
            esc(t)
        );
    };
    for (i, n) in names.iter().enumerate() {
        let (colour, shape) = style(i);
        marker(s, shape, (x0 + 8.0, yy), colour, true, n);
        text(s, yy, n);
        yy += LINE;
    }
    yy += LINE / 2.0;
    marker(s, Shape::Circle, (x0 + 8.0, yy), "#555", true, "tile");
    text(s, yy, "filled: tile's kernel");
    yy += LINE;
    marker(s, Shape::Circle, (x0 + 8.0, yy), "#555", false, "baseline");
    text(s, yy, "hollow: its baseline, same work (cuBLAS, cuBLASLt)");
    yy += LINE;
    let sample = |s: &mut String, yy: f64, dash: &str| {
        let _ = writeln!(
            s,
            "<line x1=\"{x0}\" y1=\"{yy:.1}\" x2=\"{}\" y2=\"{yy:.1}\" stroke=\"black\" stroke-width=\"1.5\"{dash}/>",
            x0 + 16.0
        );
    };
    sample(s, yy, "");
    text(
        s,
        yy,
        &format!("memory roof: copy bandwidth, {copy_gbs:.0} GB/s (measured)"),
    );
    yy += LINE;
    sample(s, yy, " stroke-dasharray=\"6 4\"");
    text(
        s,
        yy,
        &format!("nominal HBM3e {:.1} TB/s (spec sheet)", NOMINAL_GBS / 1e3),
    );
    yy += LINE;
    text(s, yy, "memory-bound rows: the copy roof is their baseline");
}

/// XML text escaping.
fn esc(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        series: &str,
        what: &str,
        flops: f64,
        bytes: f64,
        tile_ms: f64,
        base_ms: Option<f64>,
        roof: Roof,
    ) -> Row {
        Row {
            what: what.into(),
            series: series.into(),
            tile: String::new(),
            base: "cuBLAS".into(),
            ratio: 0.0,
            work: Work {
                flops,
                bytes,
                tile_ms,
                base_ms,
                roof,
            },
        }
    }

    /// Rows shaped like a real run: GEMMs near the compute roofs, a decode
    /// GEMM and a GEMV on the memory roof, a transpose with no flops.
    fn fake_rows() -> Vec<Row> {
        let gemm = |m: f64, n: f64, k: f64, e: f64, o: f64| {
            (2.0 * m * n * k, (m * k + k * n) * e + m * n * o)
        };
        let (f1, b1) = gemm(8192.0, 8192.0, 8192.0, 2.0, 2.0);
        let (f2, b2) = gemm(8192.0, 8192.0, 8192.0, 1.0, 2.0);
        let (f3, b3) = gemm(16.0, 8192.0, 8192.0, 2.0, 2.0);
        let mib = 8192.0 * 8192.0 * 2.0;
        vec![
            row(
                "gemm f16",
                "gemm f16 8192^3",
                f1,
                b1,
                1.7,
                Some(1.5),
                Roof::Dense16,
            ),
            row(
                "gemm f16",
                "gemm f16 16x8192x8192",
                f3,
                b3,
                0.045,
                Some(0.04),
                Roof::Dense16,
            ),
            row(
                "gemm_fp8 e4m3",
                "gemm_fp8 8192^3",
                f2,
                b2,
                1.08,
                Some(0.84),
                Roof::Fp8,
            ),
            row(
                "softmax f16",
                "softmax 8192x8192",
                5.0 * 8192.0 * 8192.0,
                2.0 * mib,
                0.07,
                None,
                Roof::Dense16,
            ),
            row(
                "gemv f16",
                "gemv 8192x8192",
                2.0 * 8192.0 * 8192.0,
                mib,
                0.042,
                None,
                Roof::Dense16,
            ),
            row(
                "transpose f16 <64x64>",
                "transpose",
                0.0,
                2.0 * mib,
                0.076,
                None,
                Roof::Dense16,
            ),
        ]
    }

    #[test]
    fn log_axes_map_decades_linearly() {
        let a = LogAxis::covering(0.5, 2000.0, 100.0, 500.0);
        assert_eq!((a.lo, a.hi), (-1, 4));
        assert!((a.px(0.1) - 100.0).abs() < 1e-9);
        assert!((a.px(1e4) - 500.0).abs() < 1e-9);
        // Each decade is a fifth of the span (10 is two above 0.1); y axes run upwards.
        assert!((a.px(10.0) - 260.0).abs() < 1e-9);
        let y = LogAxis::covering(10.0, 10.0, 400.0, 0.0);
        assert_eq!((y.lo, y.hi), (1, 2));
        assert!((y.px(100.0) - 0.0).abs() < 1e-9);
        assert_eq!(
            (decade(-2), decade(3), decade(7)),
            ("0.01".into(), "1000".into(), "1e7".into())
        );
    }

    #[test]
    fn work_gives_intensity_and_roof() {
        let rows = fake_rows();
        let w = &rows[0].work;
        // 2·8192³ flop over 3 · 8192² · 2 bytes.
        assert!((w.intensity() - 8192.0 / 3.0).abs() < 1e-6);
        assert!((w.attainable(4200.0) - PEAK_DENSE16_TFLOPS).abs() < 1e-9);
        // A GEMV: one flop per byte, under the memory roof.
        assert!((rows[4].work.attainable(4000.0) - 4.0).abs() < 1e-9);
        assert!(!rows[5].work.plottable());
    }

    #[test]
    fn svg_has_every_point_roof_and_legend_entry() {
        let rows = fake_rows();
        let s = svg(&rows, 4200.0, "NVIDIA H200");
        assert!(s.starts_with("<svg ") && s.ends_with("</svg>\n"));
        // Four tile kernels in the legend and on the plot (the transpose has no flops).
        assert_eq!(
            series(&rows),
            ["gemm f16", "gemm_fp8 e4m3", "softmax f16", "gemv f16"]
        );
        // Five tile points + three baselines + two legend samples, each with a title;
        // four legend markers.
        assert_eq!(s.matches("<title>").count(), 5 + 3 + 2 + 4);
        assert_eq!(s.matches("fill=\"none\" stroke=\"#").count(), 3 + 1);
        assert!(s.contains("fp8 dense 1978.9 TFLOP/s") && s.contains("f16/bf16 dense 989.4"));
        assert!(s.contains("4200 GB/s (measured)") && s.contains("stroke-dasharray"));
        assert!(!s.contains("transpose"));
        // Every tag that opens is closed (a cheap well-formedness check).
        let opened = s.matches("<circle").count()
            + s.matches("<rect").count()
            + s.matches("<polygon").count();
        let closed = s.matches("</circle>").count()
            + s.matches("</rect>").count()
            + s.matches("</polygon>").count()
            + s.matches("/>").count();
        assert!(closed >= opened);
        // Keep the picture to look at: TILE_ROOFLINE=path cargo test --example bench roofline
        if let Some(p) = std::env::var_os("TILE_ROOFLINE") {
            std::fs::write(p, &s).expect("write the svg");
        }
    }
}
