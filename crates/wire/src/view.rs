//! The part every view in this crate shares, declared once: a struct over a buffer
//! `T`, made unchecked or checked (`new_checked` runs the type's own `check_len`,
//! so a checked view's accessors cannot panic), given back with `into_inner`, and
//! read and written through the private `data` and `data_mut` its accessors use.
//! Each type writes its own `check_len` and accessors beside its declaration.

/// Declares a checked view (see the module doc). The doc comments written before
/// `pub struct`, `fn new_unchecked` and `fn new_checked` go on those items.
macro_rules! checked_view {
    (
        $(#[$struct_doc:meta])*
        pub struct $name:ident;
        $(#[$unchecked_doc:meta])*
        fn new_unchecked;
        $(#[$checked_doc:meta])*
        fn new_checked;
    ) => {
        $(#[$struct_doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<T> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            $(#[$unchecked_doc])*
            pub const fn new_unchecked(buffer: T) -> Self {
                $name { buffer }
            }

            $(#[$checked_doc])*
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
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            #[allow(dead_code)]
            fn data_mut(&mut self) -> &mut [u8] {
                self.buffer.as_mut()
            }
        }
    };
}
