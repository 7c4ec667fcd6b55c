//! The part every view in this crate shares, declared once: a struct over a buffer
//! `T`, made unchecked or checked (`new_checked` runs the type's own `check_len`,
//! so a checked view's accessors cannot panic), given back with `into_inner`, and
//! read and written through the private `data` and `data_mut` its accessors use.
//! Each type writes its own `check_len` and accessors beside its declaration.

/// Declares a checked view (see the module doc): `pub struct Name, at least MIN;`
/// after the struct's doc comments, where `MIN` is the length below which the
/// view's fixed accessors would panic. The type's own `check_len` says what a
/// checked view guarantees; most begin with `check_min_len`, the length check.
macro_rules! checked_view {
    (
        $(#[$struct_doc:meta])*
        pub struct $name:ident, at least $min:ident;
    ) => {
        $(#[$struct_doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<T> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            #[doc = concat!(
                "Wraps `buffer` without looking at it: accessors of fixed fields ",
                "panic if it is shorter than [`", stringify!($min), "`]."
            )]
            pub const fn new_unchecked(buffer: T) -> Self {
                $name { buffer }
            }

            /// Wraps `buffer` after [`check_len`](Self::check_len)'s checks, so
            /// that no accessor can panic.
            pub fn new_checked(buffer: T) -> $crate::error::Result<Self> {
                let view = Self::new_unchecked(buffer);
                view.check_len()?;
                Ok(view)
            }

            /// Gives the buffer back.
            pub fn into_inner(self) -> T {
                self.buffer
            }

            #[allow(dead_code)]
            fn data(&self) -> &[u8] {
                self.buffer.as_ref()
            }

            #[doc = concat!(
                "The buffer's length, or [`Error::Truncated`](crate::Error::Truncated) ",
                "when it is shorter than [`", stringify!($min), "`]."
            )]
            #[allow(dead_code)]
            fn check_min_len(&self) -> $crate::error::Result<usize> {
                let len = self.buffer.as_ref().len();
                if len < $min {
                    return Err($crate::error::Error::Truncated);
                }
                Ok(len)
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            #[allow(dead_code)]
            fn data_mut(&mut self) -> &mut [u8] {
                self.buffer.as_mut()
            }
        }
    };
}
