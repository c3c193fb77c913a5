//! Inline storage for a tensor's shape and strides.
//!
//! A launch reads every argument's shape and strides. Kept in a `Vec`, each is a
//! pointer chase to its own heap cache line, and after the driver's work of the previous
//! launch has evicted them each is a cache miss; kept inline, they sit in the `Tensor`
//! next to the storage pointer and offset that the launch reads anyway. Tensors of more
//! dims than fit inline (rare: kernels take up to 4-D buffers in practice) spill to the
//! heap and behave the same.

use std::fmt;
use std::ops::{Deref, DerefMut};

/// Dims kept inline; more go to the heap.
const INLINE_DIMS: usize = 4;

/// A short slice of `T` (a shape or strides), inline up to [`INLINE_DIMS`] elements.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Dims<T: Copy + Default> {
    Inline { len: u8, buf: [T; INLINE_DIMS] },
    Heap(Box<[T]>),
}

impl<T: Copy + Default> Dims<T> {
    pub(crate) fn from_slice(s: &[T]) -> Dims<T> {
        if s.len() <= INLINE_DIMS {
            let mut buf = [T::default(); INLINE_DIMS];
            buf[..s.len()].copy_from_slice(s);
            Dims::Inline {
                len: s.len() as u8,
                buf,
            }
        } else {
            Dims::Heap(s.into())
        }
    }

    /// `len` copies of `value`.
    pub(crate) fn filled(value: T, len: usize) -> Dims<T> {
        if len <= INLINE_DIMS {
            Dims::Inline {
                len: len as u8,
                buf: [value; INLINE_DIMS],
            }
        } else {
            Dims::Heap(vec![value; len].into())
        }
    }
}

impl<T: Copy + Default> Deref for Dims<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        match self {
            Dims::Inline { len, buf } => &buf[..*len as usize],
            Dims::Heap(b) => b,
        }
    }
}

impl<T: Copy + Default> DerefMut for Dims<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Dims::Inline { len, buf } => &mut buf[..*len as usize],
            Dims::Heap(b) => b,
        }
    }
}

impl<T: Copy + Default + fmt::Debug> fmt::Debug for Dims<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// A loop body for [`each`]. Closures implement it; a body too large for the compiler to
/// inline on its own is a struct whose `run` is `#[inline(always)]` (stable Rust has no
/// way to force-inline a closure), so that its index stays a constant per copy.
pub(crate) trait Body<E> {
    fn run(&mut self, k: usize) -> Result<(), E>;
}

impl<E, F: FnMut(usize) -> Result<(), E>> Body<E> for F {
    #[inline(always)]
    fn run(&mut self, k: usize) -> Result<(), E> {
        self(k)
    }
}

/// Runs `body` for `0..n` in order, stopping at the first error.
///
/// With `unroll` and `n` up to 8 the runs are written out, each guarded by `k < n`:
/// where `n` is a constant (a length from a generated launcher's spec, inlined) the
/// compiler keeps exactly `n` straight-line copies, where a `for` loop of the same body
/// is often left rolled. Otherwise it loops (one copy of the body).
#[inline(always)]
pub(crate) fn each<E>(unroll: bool, n: usize, mut body: impl Body<E>) -> Result<(), E> {
    if !unroll || n > 8 {
        return (0..n).try_for_each(|k| body.run(k));
    }
    macro_rules! runs {
        ($($k:literal)*) => { $( if $k < n { body.run($k)?; } )* };
    }
    runs!(0 1 2 3 4 5 6 7);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_heap_behave_alike() {
        for n in 0..=INLINE_DIMS + 3 {
            let v: Vec<usize> = (1..=n).collect();
            let mut d = Dims::from_slice(&v);
            assert_eq!(matches!(d, Dims::Inline { .. }), n <= INLINE_DIMS);
            assert_eq!(&*d, &v[..]);
            assert_eq!(format!("{d:?}"), format!("{v:?}"));
            if n > 0 {
                d[0] = 99;
                assert_eq!(d[0], 99);
                assert_eq!(d.len(), n);
            }
            let f = Dims::filled(7isize, n);
            assert_eq!(&*f, &vec![7isize; n][..]);
        }
        // A `Tensor` stays small: two of these, an `Arc` and an offset.
        assert_eq!(std::mem::size_of::<Dims<usize>>(), 8 + 8 * INLINE_DIMS);
    }

    #[test]
    fn each_visits_in_order_and_stops_at_the_first_error() {
        for n in 0..12 {
            let mut seen = Vec::new();
            let r: Result<(), ()> = each(n % 2 == 0, n, |k: usize| {
                seen.push(k);
                Ok(())
            });
            assert_eq!((r, seen), (Ok(()), (0..n).collect::<Vec<_>>()));
            let mut seen = Vec::new();
            let r = each(n % 3 == 0, n, |k: usize| {
                seen.push(k);
                if k == 5 {
                    Err(k)
                } else {
                    Ok(())
                }
            });
            let last = n.min(6);
            assert_eq!(r, if n > 5 { Err(5) } else { Ok(()) });
            assert_eq!(seen, (0..last).collect::<Vec<_>>());
        }
    }
}
