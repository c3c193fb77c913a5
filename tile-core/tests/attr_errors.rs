//! Mistakes in a kernel attribute's variant lists, filter and `default(..)`:
//! each is reported inside the attribute (never without a position, which
//! the fuzzer calls an unplaced error), and only there (the parameters that
//! did parse are still known to the body, so nothing cascades).

/// The diagnostics of a kernel with attribute arguments `attr` whose body
/// uses `block_m` and `threads`, each as (byte offset in the attribute's
/// text, message); `None` when it compiles.
fn errors(attr: &str) -> Option<Vec<(usize, String)>> {
    let head = "#[tile::kernel(";
    let src = format!(
        "{head}{attr})]
         fn k(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {{
             T::kernel(T::ceildiv(N, block_m), threads, |bx| {{
                 for i in T::parallel(block_m) {{
                     c[bx * block_m + i] = a[bx * block_m + i];
                 }}
             }});
         }}"
    );
    let diags = match tile_core::frontend::parse_kernel_source(&src) {
        Ok(def) => tile_core::compile(def).err()?,
        Err(d) => d,
    };
    let inside = head.len()..head.len() + attr.len();
    Some(
        diags
            .into_iter()
            .map(|d| {
                let at = d.span.start.byte_range();
                assert!(
                    inside.contains(&at.start) || (attr.is_empty() && at.start == inside.start),
                    "`{attr}`: `{}` is at {at:?}, outside the attribute {inside:?}",
                    d.message
                );
                (at.start - head.len(), d.message)
            })
            .collect(),
    )
}

/// The one error of `attr`, which must start at the text `at` (its first
/// occurrence from the end) and say `says`.
fn one_error(attr: &str, at: &str, says: &str) {
    let all = errors(attr).unwrap_or_else(|| panic!("`{attr}` compiled"));
    assert_eq!(all.len(), 1, "`{attr}`: {all:?}");
    let (pos, msg) = &all[0];
    let want = attr
        .rfind(at)
        .unwrap_or_else(|| panic!("`{at}` not in `{attr}`"));
    assert!(
        (want..want + at.len().max(1)).contains(pos),
        "`{attr}`: `{msg}` is at {pos}, not at `{at}` ({want})"
    );
    assert!(msg.contains(says), "`{attr}`: {msg}");
}

const LISTS: &str = "block_m = [64, 128], threads = [128, 256]";

#[test]
fn malformed_filters_are_placed_in_the_attribute() {
    let cases = [
        ("filter = for < threads", "threads", "expected `>`"),
        ("filter = ", "=", "expected an expression"),
        ("filter = block_m <", "<", "expected an expression"),
        ("filter = 3 +", "+", "expected an expression"),
        (
            "filter = block_m < nope",
            "nope",
            "`nope` is not a parameter",
        ),
        ("filter", "filter", "expected `= value`"),
        ("filter = block_m < threads >", ">", "cannot be chained"),
        ("filter = block_m as", "as", "end of input"),
        ("filter = (block_m", "(block_m", "not valid Rust"),
        ("filter = block_m + 1", "block_m + 1", "is a condition"),
        ("filter = |x| x", "|x|", "a filter is an expression"),
        (
            "filter = block_m > 1, filter = threads > 1",
            "filter = threads",
            "one `filter`",
        ),
        (
            "filter = block_m > 1 threads = 3",
            "threads",
            "expected `,`",
        ),
    ];
    for (filter, at, says) in cases {
        if filter.contains('(') && !filter.contains(')') {
            continue; // not tokens at all: a parse error of the file
        }
        let attr = format!("{LISTS}, {filter}");
        one_error(&attr, at, says);
    }
    // A filter that ends the attribute with a trailing comma still reads.
    assert!(errors(&format!("{LISTS}, filter = block_m < threads,")).is_none());
}

#[test]
fn malformed_lists_are_placed_in_the_attribute() {
    one_error("block_m = [64 128], threads = 128", "128]", "expected `,`");
    one_error("block_m = [], threads = 128", "[]", "at least one");
    one_error("block_m = [64, 64], threads = 128", "64]", "listed twice");
    one_error(
        "block_m = [64, 128],, threads = 128",
        ",",
        "before this comma",
    );
    one_error(
        "block_m = [64, 128], threads = 128, = 3",
        "=",
        "expected identifier",
    );
    one_error(
        "block_m = [64, 128], threads = [128, x]",
        "x",
        "lists literals",
    );
    one_error(
        "block_m = [64, 128], threads = [128, 2.0]",
        "[128",
        "of one kind",
    );
}

#[test]
fn malformed_defaults_are_placed_in_the_attribute() {
    let cases = [
        (
            "default(block_m = 96)",
            "96",
            "`96` is not listed for `block_m`",
        ),
        (
            "default(block_n = 64)",
            "block_n",
            "`block_n` is not a parameter",
        ),
        ("default(block_m = x)", "x", "one of the literals listed"),
        (
            "default(block_m = 64, block_m = 128)",
            "block_m = 128",
            "named twice",
        ),
        ("default()", "default", "names the default's values"),
        ("default(block_m = )", "=", "expected an expression"),
        ("default(block_m)", "block_m", "expected `= value`"),
        ("default = 3", "default", "written `default(block_m = 128"),
        (
            "default(block_m = 64), default(block_m = 128)",
            "default(block_m = 128",
            "one `default",
        ),
        (
            "filter = block_m < threads, default(block_m = 128, threads = 128)",
            "default",
            "the filter drops the default",
        ),
        (
            "filter = threads > 128, default(threads = 128)",
            "default",
            "every combination with `threads=128`",
        ),
    ];
    for (d, at, says) in cases {
        one_error(&format!("{LISTS}, {d}"), at, says);
    }
    one_error(
        "block_m = 64, threads = 128, default(block_m = 64)",
        "default",
        "lists no values",
    );
    one_error(
        "block_m = [64, 128], threads = 128, default(threads = 128)",
        "threads",
        "has one value",
    );
}
